-- This master ($1) holds the pauses of versions $2: it hands out no job of their queues, its
-- workers were told to give back the prefetched ones they have not started (each reads that
-- before it starts another job), and no claim it began before it knew of them is still out.
-- Whoever paused waits for this (drover.pause_unconfirmed).
UPDATE drover.nodes SET pauses_held = $2::bigint[] WHERE id = $1
