<?php

namespace Drover\Dashboard;

/** How much the dashboard reads at most. */
final class Limits
{
    /** Rows a list shows. */
    public const PAGE = 50;

    /** Counts shown up to this many (a count is a walk of the index; a huge backlog shows as "at least"). */
    public const COUNT_CAP = 100000;

    /**
     * The overview counts each queue's pending and delayed jobs up to this many (ten queues of a
     * million then cost a tenth of a walk each); a queue past it shows "10,000+" with the
     * table's statistics' estimate beside it (QueueRepository::estimates).
     */
    public const OVERVIEW_COUNT_CAP = 10000;

    /** A search counts its matches exactly up to this many, and says "more than" beyond. */
    public const SEARCH_COUNT_CAP = 10000;

    /** Milliseconds a search's count may take; past them it says what it counted so far. */
    public const SEARCH_COUNT_MS = 120;

    /** Milliseconds a search's page may read; past them it shows what it found and goes on. */
    public const SEARCH_PAGE_MS = 120;

    /** Milliseconds the tag page counts each state for. */
    public const TAG_COUNT_MS = 35;

    /**
     * Milliseconds the first window of a search may take, past its time box: it is little work
     * (SEARCH_WINDOW keys), and a loaded host must not leave a small table uncounted.
     */
    public const SEARCH_FIRST_WINDOW_MS = 2000;

    /** Keys a search reads in its first window (each later one as many as half the time left reads at the pace so far). */
    public const SEARCH_WINDOW = 2000;

    /**
     * A workflow name's prefix matched by at most this many workflows is read through
     * workflows_name and sorted newest first (a bounded sort); one matched by more is found by
     * walking the workflows newest first (workflows_age, workflows_state_age), where it is common
     * enough to fill a page soon (Repositories\WorkflowRepository::page).
     */
    public const WORKFLOW_NAME_SORT = 10000;

    /**
     * Milliseconds the walk for a common prefix may take before it gives way to reading the
     * prefix's workflows through workflows_name from the page's oldest time (they are common,
     * but old: Repositories\WorkflowRepository::newestByName).
     */
    public const WORKFLOW_WALK_MS = 60;

    /** Nodes a workflow's page shows and draws (declaration order); a larger graph says how many more. */
    public const WORKFLOW_NODES = 500;

    /** Failed, and running, steps a workflow's page lists per node (the counts are of all of them). */
    public const WORKFLOW_STEPS_LISTED = 50;

    /** Jobs a bulk action settles per transaction (docs/dashboard.md, "Acting on all that match"). */
    public const ACTION_BATCH = 500;

    /** A bulk action pauses this many times as long as each batch took before the next. */
    public const ACTION_PAUSE = 2.0;
}
