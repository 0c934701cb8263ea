<?php

namespace Drover\Dashboard;

/** How much the dashboard reads at most. */
final class Limits
{
    /** Rows a list shows. */
    public const PAGE = 50;

    /** Counts shown up to this many (a count is a walk of the index; a huge backlog shows as "at least"). */
    public const COUNT_CAP = 100000;
}
