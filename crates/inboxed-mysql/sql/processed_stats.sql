-- processed_stats: size, growth and age of consumer $1's keys, without counting the table.
-- $1 consumer_name
--
-- The row count and sizes are InnoDB's estimates in information_schema.TABLES (refreshed by
-- ANALYZE TABLE or in the background), for the whole table; the table is looked up in the
-- connection's database, which MySqlStore::connect makes the store's schema. The last minute's
-- keys are a range of the received_at index; the oldest key is the first of that index that
-- belongs to the consumer (fast while the consumer's keys are common in the table).
SELECT
    (SELECT CAST(TABLE_ROWS AS SIGNED) FROM information_schema.TABLES
     WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{{prefix}}{{processed}}')
        AS estimated_rows,
    coalesce((SELECT CAST(DATA_LENGTH AS SIGNED) FROM information_schema.TABLES
              WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{{prefix}}{{processed}}'),
             0) AS table_bytes,
    coalesce((SELECT CAST(INDEX_LENGTH AS SIGNED) FROM information_schema.TABLES
              WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{{prefix}}{{processed}}'),
             0) AS index_bytes,
    (SELECT CAST(COUNT(*) AS SIGNED) FROM (
        SELECT 1 FROM {{schema}}.`{{prefix}}{{processed}}`
        WHERE received_at > NOW(6) - INTERVAL 1 MINUTE AND consumer_name = $1
        LIMIT 10000000
    ) AS recent) AS last_minute,
    (SELECT UNIX_TIMESTAMP(received_at) * 1e3 FROM {{schema}}.`{{prefix}}{{processed}}`
     WHERE consumer_name = $1
     ORDER BY received_at
     LIMIT 1) AS oldest_ms
