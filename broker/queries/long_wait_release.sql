-- An alert that could not be sent gives back its right: the row it took ($2, seconds since the
-- epoch, as long_wait_notice.sql returned) is deleted, so the next check alerts again instead of
-- staying silent for a whole cooldown. A later alert's row (another time) is left alone.
DELETE FROM drover.long_waits
WHERE queue = $1 AND abs(extract(epoch FROM notified_at)::float8 - $2::float8) < 0.000001
