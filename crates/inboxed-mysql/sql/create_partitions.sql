-- create_partitions: carves the partition of ids below $1 (ms since the epoch, above every
-- partition's bound but pMAX's) out of pMAX, on the maintenance session. No rows.
-- $1 upper bound (an integer, so the statement built from it is only digits and names)
--
-- DDL takes no placeholders: the statement is prepared from text, in one text query (the
-- prepared-statement protocol refuses PREPARE, 1295); the session's next PREPARE of the name
-- replaces it. REORGANIZE moves pMAX's rows
-- (ids from a clock ahead of the partitions, normally none). The session's lock_wait_timeout
-- (set by the maintenance) bounds the wait for the table's metadata lock, which waits for
-- every open transaction that read the table: a claim behind this DDL waits as long.
--! one round trip
SET @inboxed_ddl = CONCAT(
    'ALTER TABLE {{schema}}.`{{prefix}}processed_log` REORGANIZE PARTITION pMAX INTO (',
    'PARTITION p', CAST($1 AS SIGNED), ' VALUES LESS THAN (', CAST($1 AS SIGNED), '), ',
    'PARTITION pMAX VALUES LESS THAN MAXVALUE)');
PREPARE inboxed_ddl FROM @inboxed_ddl;
EXECUTE inboxed_ddl
