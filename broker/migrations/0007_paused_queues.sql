-- Queues paused by name, for every master of this database: Laravel's `queue:pause
-- connection:queue`, `Queue::pause()` and `Queue::pauseFor()` (the package writes a row on
-- QueuePaused and deletes it on QueueResumed; `drover:pause --queue` likewise on any Laravel).
-- Masters read the table every second and claim nothing from a paused queue; running jobs finish.
-- State is here, not in the application's cache, so masters on other hosts see it.
CREATE TABLE drover.paused_queues (
    queue     text PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now(),
    -- NULL: until resumed. A pause with a TTL (pauseFor) ends by itself at this time.
    until     timestamptz,
    CHECK (until IS NULL OR until > paused_at)
);
