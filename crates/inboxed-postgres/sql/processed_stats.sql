-- processed_stats: size, growth and age of consumer $1's keys, without counting the table.
-- $1 consumer_name
--
-- Rows are the catalog's estimate: reltuples (kept by VACUUM and ANALYZE) times the consumer's
-- frequency among consumer_name's most common values in pg_stats, or, for a consumer not among
-- them, the remaining frequency shared by the remaining distinct values (the planner's own
-- rule). NULL before the table was first analyzed. Bytes are the whole table's (heap and
-- indexes). The last minute's keys and the oldest key are range reads of the expiry index.
WITH rel AS (
    SELECT c.oid, c.reltuples, c.relname, n.nspname
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = '{{schema}}."{{prefix}}processed_messages"'::regclass
),
col AS (
    SELECT s.most_common_vals::text::text[] AS vals, s.most_common_freqs AS freqs, s.n_distinct
    FROM pg_stats s, rel
    WHERE s.schemaname = rel.nspname AND s.tablename = rel.relname
      AND s.attname = 'consumer_name'
),
share AS (
    SELECT coalesce(
        (SELECT col.freqs[array_position(col.vals, $1)] FROM col),
        (SELECT (1 - coalesce((SELECT sum(f) FROM unnest(col.freqs) f), 0))
                / greatest(
                      CASE WHEN col.n_distinct < 0 THEN -col.n_distinct * rel.reltuples
                           ELSE col.n_distinct END
                      - coalesce(cardinality(col.vals), 0),
                      1)
         FROM col, rel)
    ) AS freq
)
SELECT
    CASE WHEN rel.reltuples < 0 OR share.freq IS NULL THEN NULL
         ELSE round(rel.reltuples * share.freq)::bigint END AS estimated_rows,
    pg_relation_size(rel.oid) AS table_bytes,
    pg_indexes_size(rel.oid) AS index_bytes,
    (SELECT count(*) FROM (
        SELECT 1 FROM {{schema}}."{{prefix}}processed_messages"
        WHERE consumer_name = $1 AND received_at > now() - interval '1 minute'
        LIMIT 10000000) recent) AS last_minute,
    (SELECT extract(epoch FROM min(received_at)) * 1000
     FROM {{schema}}."{{prefix}}processed_messages"
     WHERE consumer_name = $1)::float8 AS oldest_ms
FROM rel, share
