-- processed_stats: size, growth and age of consumer ?1's keys, without counting the table.
-- ?1 consumer_name
--
-- SQLite keeps no running row counts. sqlite_stat1 (created by migration 4, refreshed by
-- ANALYZE or `PRAGMA optimize`) holds, for the expiry index (consumer_name, received_at), the
-- row count and the average rows per consumer_name: the estimate reported here (NULL until
-- the table had rows when it was last analyzed). Bytes are the whole database file's; SQLite does not split
-- them by table without the optional dbstat module. The last minute's keys and the oldest key
-- are range reads of the expiry index.
SELECT
    (SELECT CAST(substr(stat, instr(stat, ' ') + 1,
                        instr(substr(stat, instr(stat, ' ') + 1) || ' ', ' ') - 1) AS INTEGER)
     FROM {{schema}}.sqlite_stat1
     WHERE tbl = '{{prefix}}processed_messages'
       AND idx = '{{prefix}}processed_messages_expiry_idx'
     LIMIT 1) AS estimated_rows,
    (SELECT page_count FROM pragma_page_count()) * (SELECT page_size FROM pragma_page_size())
        AS table_bytes,
    0 AS index_bytes,
    (SELECT count(*) FROM (
        SELECT 1 FROM {{schema}}."{{prefix}}processed_messages"
        WHERE consumer_name = ?1
          AND received_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 minute')
        LIMIT 10000000)) AS last_minute,
    (SELECT CAST((julianday(min(received_at)) - 2440587.5) * 86400000 AS INTEGER)
     FROM {{schema}}."{{prefix}}processed_messages"
     WHERE consumer_name = ?1) AS oldest_ms
