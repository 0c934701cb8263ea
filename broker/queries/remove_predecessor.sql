-- The row of node $1 (pid $2, host $3) that a previous master of this state directory left when
-- it did not exit cleanly: never this master's own ($4). The host and pid make sure it is that
-- master's, should the state directory have served another database before.
DELETE FROM drover.nodes WHERE id = $1 AND pid = $2 AND hostname = $3 AND id <> $4
