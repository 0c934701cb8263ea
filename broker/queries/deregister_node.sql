DELETE FROM drover.nodes WHERE id = $1
