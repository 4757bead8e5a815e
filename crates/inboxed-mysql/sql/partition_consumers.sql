-- partition_consumers: the consumers with keys in the partition of upper bound $1, each with
-- the partition's newest receipt (the same for every row; no row: the partition is empty).
-- $1 upper bound (an integer: the name is `p` and its digits)
--
-- Both read an index, not the rows: the consumers by a loose scan of the primary key (one
-- entry per consumer), the newest receipt at the end of the received_at index. Prepared from
-- text, in one text query, as create_partitions.sql: the partition is named. The table is read
-- twice, by the aliases pc and pn, which lock_processed_log.sql locks too (a table locked with
-- LOCK TABLES is read once per name in a statement).
--! one round trip
SET @inboxed_sql = CONCAT(
    'SELECT CONVERT(c.consumer_name USING utf8mb4), ',
    'CAST(UNIX_TIMESTAMP(n.newest) * 1000 AS SIGNED) ',
    'FROM (SELECT pc.consumer_name FROM {{schema}}.`{{prefix}}processed_log` PARTITION (p',
    CAST($1 AS SIGNED), ') AS pc GROUP BY pc.consumer_name) AS c ',
    'CROSS JOIN (SELECT MAX(pn.received_at) AS newest ',
    'FROM {{schema}}.`{{prefix}}processed_log` PARTITION (p', CAST($1 AS SIGNED), ') AS pn) AS n');
PREPARE inboxed_q FROM @inboxed_sql;
--! rows
EXECUTE inboxed_q
