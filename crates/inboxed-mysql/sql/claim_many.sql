-- claim_many: claim for several distinct keys of one consumer at once, inside the batch's
-- transaction. Returns the ids of the keys it claimed (those not dead-lettered); no rows when
-- a key of the batch was processed already, and the store then claims key by key (claim.sql).
-- $1 consumer_name, $2 the keys as a JSON array of [id, message_type, correlation_id,
-- payload hash in hex], ids distinct
--
-- One round trip instead of one per key: in a batch of 100 the round trips, not the inserts,
-- were the cost. A plain INSERT of every key, never INSERT IGNORE (claim.sql says why):
-- either it inserts them all, and every row of the batch's keys read at the end is one this
-- transaction wrote, or a duplicate (1062) rolls the statement back whole and stops the
-- server before the next. MySQL has no `INSERT … RETURNING`, and `ON DUPLICATE KEY UPDATE`,
-- which would skip a duplicate, cannot say which keys it skipped (sqlx's CLIENT_FOUND_ROWS):
-- all or nothing is what lets the read at the end tell. A batch holding a processed key (a
-- redelivery after a crash between commit and ack) pays the key-by-key claim.
--
-- A key held by a concurrent uncommitted claim makes this wait, then fail with 1062 if that
-- claim commits, or insert if it rolls back. Rows are written in byte order of the id, the
-- order in which record_attempts.sql counts and clear_many_attempts.sql clears them, so that
-- two batches sharing keys wait on each other instead of deadlocking.
--! one round trip
--! duplicate key: no rows
INSERT INTO {{schema}}.`{{prefix}}processed_messages`
    (consumer_name, message_id, message_type, correlation_id, payload_hash)
SELECT $1, CAST(k.id AS BINARY), k.message_type, k.correlation_id, UNHEX(k.hash)
FROM JSON_TABLE($2, '$[*]' COLUMNS (
    id             VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[0]',
    message_type   LONGTEXT CHARACTER SET utf8mb4 PATH '$[1]',
    correlation_id LONGTEXT CHARACTER SET utf8mb4 PATH '$[2]',
    hash           VARCHAR(64) CHARACTER SET ascii PATH '$[3]'
)) AS k
ORDER BY CAST(k.id AS BINARY);
-- The check after the write, as in claim.sql (without its plain guard before, which would
-- leave a dead key out of the insert and its processed row, should one exist, read as this
-- batch's): a dead letter of a key, written (or being written) meanwhile, undoes that key's
-- claim; the locking read waits for an uncommitted one. The store then finds the key dead.
DELETE p
FROM JSON_TABLE($2, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[0]')) AS k
STRAIGHT_JOIN {{schema}}.`{{prefix}}processed_messages` p
    ON p.consumer_name = $1 AND p.message_id = CAST(k.id AS BINARY)
WHERE EXISTS (
    SELECT 1 FROM {{schema}}.`{{prefix}}dead_letters` d
    WHERE d.consumer_name = $1 AND d.message_id = p.message_id AND d.reason <> 'conflict'
    LOCK IN SHARE MODE
);
-- The keys claimed: every row of the batch's keys left is this transaction's. A join from
-- the list by primary key (STRAIGHT_JOIN keeps that order).
--! rows
SELECT STRAIGHT_JOIN CONVERT(p.message_id USING utf8mb4)
FROM JSON_TABLE($2, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[0]')) AS k
JOIN {{schema}}.`{{prefix}}processed_messages` p
    ON p.consumer_name = $1 AND p.message_id = CAST(k.id AS BINARY)
