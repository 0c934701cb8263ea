-- Completed jobs for the history ($3.. as parallel arrays; times as seconds since the epoch, by
-- the database's clock as the master placed them). A row already there (a retried write) is left.
INSERT INTO drover.recent_jobs
    (id, attempt, queue, class, payload, node, hostname, worker_pid, started_at, finished_at,
     runtime_ms, wait_ms, cpu_ms, memory_kib)
SELECT r.id, r.attempt, r.queue, r.class, r.payload, $1, $2, r.pid, to_timestamp(r.started),
       to_timestamp(r.finished), r.runtime_ms, r.wait_ms, r.cpu_ms, r.memory_kib
FROM unnest($3::bigint[], $4::int[], $5::text[], $6::text[], $7::text[], $8::int[],
            $9::float8[], $10::float8[], $11::float8[], $12::float8[], $13::float8[], $14::bigint[])
     AS r(id, attempt, queue, class, payload, pid, started, finished, runtime_ms, wait_ms, cpu_ms, memory_kib)
ON CONFLICT (id, attempt) DO NOTHING
