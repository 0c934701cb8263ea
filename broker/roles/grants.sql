-- The rights of drover's roles on drover's schema in this database (docs/postgres-roles.md),
-- given by whoever migrates (the schema's owner) after every migration, so a table a new release
-- adds is granted with it. Idempotent; does nothing for a role that does not exist.
--
-- drover_master    claims, settles, renews and maintains: every row of drover's tables, their
--                  sequences and functions (reindex_drained included); schema_migrations read.
-- drover_producer  enqueues: INSERT of a plain job's columns into drover.jobs and the three
--                  enqueue functions (which run with their owner's rights, migration 0013);
--                  reads the columns Laravel's Queue::size() and friends count; lets a held
--                  group go on when its failed job is forgotten (held_uuids, release_held).
-- drover_reader    the dashboard and `drover:status`: reads every table of drover's schema.
-- drover_operator  the dashboard's actions and the operator's artisan verbs (retry, forget,
--                  clear, pause, restart, the schedule's): drover_reader, every row of drover's
--                  tables, and what a producer may call.
-- None of them is given anything outside schema drover.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'drover_master') THEN
        GRANT USAGE ON SCHEMA drover TO drover_master;
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA drover TO drover_master;
        REVOKE INSERT, UPDATE, DELETE ON drover.schema_migrations FROM drover_master;
        GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA drover TO drover_master;
        GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA drover TO drover_master;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'drover_producer') THEN
        GRANT USAGE ON SCHEMA drover TO drover_producer;
        -- The columns a plain job is inserted with (php-client/src/Queue/JobStatement.php): not
        -- its id, lease, attempts, group or limit marks, which the master's triggers trust.
        REVOKE INSERT ON drover.jobs FROM drover_producer;
        GRANT INSERT (queue, payload, available_at, priority, max_attempts) ON drover.jobs TO drover_producer;
        -- What Laravel's Queue::size() and friends count, and the id an insert returns: never a
        -- payload.
        REVOKE SELECT ON drover.jobs, drover.group_jobs, drover.limit_waiting FROM drover_producer;
        GRANT SELECT (id, queue, available_at, lease_token) ON drover.jobs TO drover_producer;
        GRANT SELECT (queue) ON drover.group_jobs, drover.limit_waiting TO drover_producer;
        GRANT USAGE ON SEQUENCE drover.jobs_id_seq TO drover_producer;
        GRANT EXECUTE ON FUNCTION drover.enqueue, drover.enqueue_limited, drover.enqueue_fair,
            drover.held_uuids(), drover.release_held(text) TO drover_producer;
        -- A job that completes inside its own transaction, on the application's connection, and
        -- its steps that run once (migration 0015, docs/exactly-once.md).
        GRANT EXECUTE ON FUNCTION drover.complete_within(bigint, bigint),
            drover.step_result(text, text), drover.record_step(text, text, text) TO drover_producer;
        -- Workflows: dispatch, signal, a step's result and context, any job's progress
        -- (migration 0016, docs/workflows.md).
        GRANT EXECUTE ON FUNCTION drover.workflow_create(text, boolean, jsonb, bigint, text),
            drover.workflow_add_steps(bigint, text[], text[], text[], smallint[], integer[]),
            drover.workflow_start(bigint), drover.workflow_signal(text, text, text),
            drover.workflow_record_result(bigint, bigint, text), drover.workflow_of(bigint),
            drover.workflow_results(bigint, text), drover.workflow_signal_data(bigint, text),
            drover.job_progress(bigint, bigint, integer, text), drover.workflow_retry_step(bigint, text),
            drover.workflow_retry_payload(text) TO drover_producer;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'drover_reader') THEN
        GRANT USAGE ON SCHEMA drover TO drover_reader;
        GRANT SELECT ON ALL TABLES IN SCHEMA drover TO drover_reader;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'drover_operator') THEN
        GRANT USAGE ON SCHEMA drover TO drover_operator;
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA drover TO drover_operator;
        REVOKE INSERT, UPDATE, DELETE ON drover.schema_migrations FROM drover_operator;
        GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA drover TO drover_operator;
        GRANT EXECUTE ON FUNCTION drover.enqueue, drover.enqueue_limited, drover.enqueue_fair,
            drover.held_uuids(), drover.release_held(text) TO drover_operator;
        GRANT EXECUTE ON FUNCTION drover.complete_within(bigint, bigint),
            drover.step_result(text, text), drover.record_step(text, text, text) TO drover_operator;
        GRANT EXECUTE ON FUNCTION drover.workflow_create(text, boolean, jsonb, bigint, text),
            drover.workflow_add_steps(bigint, text[], text[], text[], smallint[], integer[]),
            drover.workflow_start(bigint), drover.workflow_signal(text, text, text),
            drover.workflow_record_result(bigint, bigint, text), drover.workflow_of(bigint),
            drover.workflow_results(bigint, text), drover.workflow_signal_data(bigint, text),
            drover.job_progress(bigint, bigint, integer, text), drover.workflow_steps_deleted(bigint[], text),
            drover.workflow_cancel(bigint), drover.workflow_retry_step(bigint, text),
            drover.workflow_retry_payload(text) TO drover_operator;
    END IF;
END $$;
