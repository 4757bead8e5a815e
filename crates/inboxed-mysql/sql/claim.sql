-- claim: records (consumer_name, message_id) inside the handler's transaction unless the key
-- was processed already or sits on the dead-letter path. Changes one row when it claimed.
-- $1 consumer_name, $2 message_id, $3 message_type, $4 correlation_id, $5 payload_hash
--
-- A plain INSERT, never INSERT IGNORE (which would turn a too-long id into a cut one and a
-- false duplicate) nor ON DUPLICATE KEY UPDATE (whose row count, under sqlx's
-- CLIENT_FOUND_ROWS, is the same for a new row and a duplicate). A duplicate is InnoDB's error
-- 1062, which rolls back this statement only; the directive below makes it "no row". A key
-- held by a concurrent uncommitted claim makes this wait, then fail with 1062 if that claim
-- commits, or insert if it rolls back. The guard skips keys already dead (the common case of a
-- dead key redelivered) with a plain read. Both statements go in one round trip (the write
-- and its check would otherwise cost two on every message): the server stops at a duplicate.
--! one round trip
--! duplicate key: no rows
INSERT INTO {{schema}}.`{{prefix}}processed_messages`
    (consumer_name, message_id, message_type, correlation_id, payload_hash)
SELECT $1, $2, $3, $4, $5 FROM DUAL
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}.`{{prefix}}dead_letters` d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
);
-- Then the check that decides, after the write: a dead letter of the key written (or being
-- written) meanwhile. The locking read waits for one uncommitted; dead_letter.sql writes first
-- and checks for this claim the same way, so whichever checks last sees the other's row, and
-- two checking at once is a deadlock InnoDB breaks (retried). A plain guard before the write,
-- on both sides, let both pass under READ COMMITTED, which locks no gap: the key ended up
-- processed and dead. Deleting the row undoes the claim; the store then finds it dead.
--! undo: no rows
DELETE FROM {{schema}}.`{{prefix}}processed_messages`
WHERE consumer_name = $1 AND message_id = $2
  AND EXISTS (
    SELECT 1 FROM {{schema}}.`{{prefix}}dead_letters` d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
    LOCK IN SHARE MODE
  )
