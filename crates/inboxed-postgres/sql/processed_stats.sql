-- processed_stats: size, growth and age of consumer $1's keys, without counting the table.
-- $1 consumer_name
--
-- Serves the plain table (its own single leaf) and the time-partitioned one alike (its leaves,
-- from pg_partition_tree, hold all of its rows and bytes).
-- Rows are the catalog's estimate, summed over leaves: each leaf's reltuples (kept by VACUUM
-- and ANALYZE; a never-vacuumed empty leaf counts 0) times the consumer's frequency among that
-- leaf's most common consumer_id values in pg_stats, or, for a consumer not among them, the
-- remaining frequency shared by the remaining distinct values (the planner's own rule). Per
-- leaf, because autovacuum analyzes partitions but never a partitioned parent. NULL while a
-- leaf with rows has no statistics yet. Bytes are the whole table's (heap and indexes, all
-- consumers). The last minute's keys are a range read of the time index (a btree on the plain
-- table, a BRIN on the partitioned one); the oldest key comes from <table>_oldest (migrations 4
-- and 5), which knows how to find it cheaply in each.
WITH target AS (
    SELECT '{{schema}}."{{prefix}}{{processed}}"'::regclass AS rel,
           (SELECT id FROM {{schema}}."{{prefix}}consumers" WHERE name = $1) AS cid
),
leaf_id AS (
    SELECT t.relid FROM target, pg_partition_tree(target.rel) t WHERE t.isleaf
    UNION
    SELECT c.oid FROM target JOIN pg_class c ON c.oid = target.rel WHERE c.relkind = 'r'
),
leaf AS (
    SELECT c.oid, c.relname, n.nspname, c.relpages,
           CASE WHEN c.reltuples < 0 AND c.relpages = 0 THEN 0 ELSE c.reltuples END AS tuples
    FROM leaf_id l
    JOIN pg_class c ON c.oid = l.relid
    JOIN pg_namespace n ON n.oid = c.relnamespace
),
share AS (
    SELECT leaf.oid, leaf.tuples,
           CASE WHEN leaf.tuples = 0 THEN 0
                WHEN s.attname IS NULL THEN NULL
                ELSE coalesce(
                    s.most_common_freqs[array_position(s.most_common_vals::text::text[],
                                                       (SELECT cid::text FROM target))],
                    (1 - coalesce((SELECT sum(f) FROM unnest(s.most_common_freqs) f), 0))
                    / greatest(
                          CASE WHEN s.n_distinct < 0 THEN -s.n_distinct * leaf.tuples
                               ELSE s.n_distinct END
                          - coalesce(cardinality(s.most_common_freqs), 0),
                          1))
           END AS freq
    FROM leaf
    LEFT JOIN pg_stats s
           ON s.schemaname = leaf.nspname AND s.tablename = leaf.relname
          AND s.attname = 'consumer_id' AND NOT s.inherited
)
SELECT
    CASE WHEN bool_and(share.tuples >= 0 AND share.freq IS NOT NULL)
         THEN round(sum(share.tuples * share.freq))::bigint END AS estimated_rows,
    coalesce(sum(pg_relation_size(share.oid)), 0)::bigint AS table_bytes,
    coalesce(sum(pg_indexes_size(share.oid)), 0)::bigint AS index_bytes,
    (SELECT count(*) FROM (
        SELECT 1 FROM {{schema}}."{{prefix}}{{processed}}", target
        WHERE consumer_id = target.cid
          AND received_s >= (floor(extract(epoch FROM now())) - 1577836800 - 60)::integer
        LIMIT 10000000) recent) AS last_minute,
    ((SELECT {{schema}}."{{prefix}}{{processed}}_oldest"(cid) FROM target)::float8 + 1577836800)
        * 1000 AS oldest_ms
FROM share
