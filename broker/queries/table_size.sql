-- Whether {table} (a table drover compacts, broker/src/compact.rs) holds no row, and how many
-- bytes it takes (heap, indexes and TOAST). The emptiness probe stops at the first live row.
SELECT NOT EXISTS (SELECT 1 FROM {table}), pg_total_relation_size('{table}')
