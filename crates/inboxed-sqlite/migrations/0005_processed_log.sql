-- 0005: on PostgreSQL, the time-partitioned dedup table. SQLite has no partitions; this
-- migration only keeps the numbering the same in every backend.
SELECT 1;
