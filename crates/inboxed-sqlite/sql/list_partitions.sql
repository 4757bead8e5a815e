-- list_partitions: SQLite has no partitions; the statement lists none, in the shape of
-- PostgreSQL's (one column, `partition`).
SELECT NULL AS partition WHERE 0
