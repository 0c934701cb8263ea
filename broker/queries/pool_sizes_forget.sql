-- This master ($1) re-read its configuration (a reload): the sizes the console set for it are
-- over; config/drover.php's hold again.
DELETE FROM drover.pool_sizes WHERE node = $1
