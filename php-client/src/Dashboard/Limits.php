<?php

namespace Drover\Dashboard;

/** How much the dashboard reads at most. */
final class Limits
{
    /** Rows a list shows. */
    public const PAGE = 50;

    /** Counts shown up to this many (a count is a walk of the index; a huge backlog shows as "at least"). */
    public const COUNT_CAP = 100000;

    /** A search counts its matches exactly up to this many, and says "more than" beyond. */
    public const SEARCH_COUNT_CAP = 10000;

    /** Milliseconds a search's count may take before it is reported as not finished. */
    public const SEARCH_COUNT_MS = 250;

    /** Jobs a bulk action settles per transaction (docs/dashboard.md, "Acting on all that match"). */
    public const ACTION_BATCH = 500;
}
