-- This node's totals per minute, queue and job class ($3..$12 as parallel arrays; $3 in minutes
-- since the epoch). A minute still open is written again with its new totals: the row is replaced,
-- never added to, so a retried write changes nothing.
INSERT INTO drover.metrics AS m
    (minute, node, hostname, queue, class, completed, failed, released, runtime, wait, cpu, memory)
SELECT to_timestamp(r.minute * 60), $1, $2, r.queue, r.class, r.completed, r.failed, r.released,
       r.runtime::jsonb, r.wait::jsonb, r.cpu::jsonb, r.memory::jsonb
FROM unnest($3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
            $9::text[], $10::text[], $11::text[], $12::text[])
     AS r(minute, queue, class, completed, failed, released, runtime, wait, cpu, memory)
ON CONFLICT (minute, node, queue, class) DO UPDATE
SET completed = excluded.completed, failed = excluded.failed, released = excluded.released,
    runtime = excluded.runtime, wait = excluded.wait, cpu = excluded.cpu, memory = excluded.memory
