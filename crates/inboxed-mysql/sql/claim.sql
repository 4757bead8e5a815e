-- claim: records (consumer_name, message_id) inside the handler's transaction unless the key
-- was processed already or sits on the dead-letter path. Changes one row when it inserted.
-- $1 consumer_name, $2 message_id, $3 message_type, $4 correlation_id, $5 payload_hash
--
-- A plain INSERT, never INSERT IGNORE (which would turn a too-long id into a cut one and a
-- false duplicate) nor ON DUPLICATE KEY UPDATE (whose row count, under sqlx's
-- CLIENT_FOUND_ROWS, is the same for a new row and a duplicate). A duplicate is InnoDB's error
-- 1062, which rolls back this statement only; the directive below makes it "no row". A key
-- held by a concurrent uncommitted claim makes this wait, then fail with 1062 if that claim
-- commits, or insert if it rolls back. The guard's read locks, as dead_letter.sql's does: a
-- plain read would not see a dead letter being written concurrently, and the key would end up
-- both processed and dead; locking, each waits for the other's uncommitted row (or InnoDB
-- breaks the wait with a deadlock, which is retried).
--! duplicate key: no rows
INSERT INTO {{schema}}.`{{prefix}}processed_messages`
    (consumer_name, message_id, message_type, correlation_id, payload_hash)
SELECT $1, $2, $3, $4, $5 FROM DUAL
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}.`{{prefix}}dead_letters` d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
    LOCK IN SHARE MODE
)
