-- Finishes the group moves a settle deferred because a producer held the group's lock
-- (drover.groups_catch_up, migrations/0005_groups.sql), and applies the workflow step ends
-- deferred because another transaction held their workflow's lock (drover.workflows_catch_up,
-- migrations/0016_workflows.sql): how many it finished. Never waits for a lock; nearly free when
-- nothing is deferred.
SELECT drover.groups_catch_up() + drover.workflows_catch_up()
