-- drop_partition: drops the expired partition of upper bound $1, on the maintenance session:
-- an O(1) change of the table's files, whatever its row count. No rows.
-- $1 upper bound (an integer: the name is `p` and its digits)
--
-- As create_partitions.sql, prepared from text in one text query, and bounded by the session's
-- lock_wait_timeout.
--! one round trip
SET @inboxed_ddl = CONCAT(
    'ALTER TABLE {{schema}}.`{{prefix}}processed_log` DROP PARTITION p', CAST($1 AS SIGNED));
PREPARE inboxed_ddl FROM @inboxed_ddl;
EXECUTE inboxed_ddl
