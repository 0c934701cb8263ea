<?php

namespace Drover\Workflow;

/**
 * A workflow that cannot be dispatched as declared: a step named twice, an `after:` naming a step
 * the workflow does not have, a step after itself, a cycle, a condition or wait that cannot be
 * read, a job whose options a workflow's step cannot have (a group, limits, a fair key, a
 * deduplication id) — or the database refusing the graph (SQLSTATE 22023). Its message names the
 * workflow, the step and the fix. Thrown before anything is written, or with the dispatch's
 * writes rolled back.
 */
final class InvalidWorkflow extends \InvalidArgumentException
{
}
