-- enqueue: the store-then-process receipt: stores a message unless its key is stored already.
-- Returns the new row's id, or no row for a duplicate (the store then reads enqueue_lookup).
-- $1 consumer_name, $2 message_id, $3 aggregate_id, $4 message_type, $5 correlation_id,
-- $6 payload, $7 payload_hash, $8 headers (migration 10's stored form; NULL: none)
--
-- A plain INSERT whose error 1062 is "no row" (claim.sql says why not INSERT IGNORE). MySQL has
-- no INSERT … RETURNING (MariaDB's is not MySQL's): the id is LAST_INSERT_ID() of this
-- connection, read right after. Times are milliseconds since the epoch (migration 2).
--
-- Receipts of one aggregate take turns, as PostgreSQL's advisory lock makes them: ordered mode
-- reads arrival order from the id, InnoDB draws the id at the insert, and a worker's check of
-- earlier rows cannot see an uncommitted one. Two receipts that overlapped could commit the
-- later id first, and the later message would run first. The turn is a row of the locks table
-- locked until this receipt commits (taken before the id is drawn): one of 65,536 per
-- consumer and aggregate, so the table stays small, and two aggregates that share a row only
-- wait on each other's receipts. The row's first two receipts at once can deadlock (both wait
-- on its insert, then both want it): InnoDB rolls one back and the receipt runs again. No
-- aggregate, no turn.
INSERT INTO {{schema}}.`{{prefix}}locks` (name)
SELECT CONCAT('aggregate/', CRC32(CONCAT($1, '|', $3)) & 65535) FROM DUAL
WHERE $3 IS NOT NULL
ON DUPLICATE KEY UPDATE name = name;
--! duplicate key: no rows
INSERT INTO {{schema}}.`{{prefix}}inbox_messages`
    (consumer_name, message_id, aggregate_id, message_type, correlation_id, payload,
     payload_hash, received_at, available_at, headers)
VALUES ($1, $2, $3, $4, $5, $6, $7, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000),
        FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), $8);
SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id
