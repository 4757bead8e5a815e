-- finish_locked: settles the rows of a lock-held batch inside its transaction: each row done,
-- or failed (back to pending after a backoff, or dead), with its attempt count; the rows'
-- attempt counters are forgotten. No fencing is needed: this transaction holds the row locks.
-- $1 the fates, a JSON array of {"id", "status" (done | pending | dead), "error" (or null),
-- "backoff" (ms), "attempts"}; $2 consumer_name; $3 the rows' message ids (a JSON array)
--
-- Joins from the lists by primary key (claim_stamp.sql says why not `IN (… JSON_TABLE …)`).
-- NOW(6) is this statement's time, not the transaction's start: the backoff runs from now.
DELETE a
FROM JSON_TABLE($3, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k
STRAIGHT_JOIN {{schema}}.`{{prefix}}attempts` a
    ON a.consumer_name = $2 AND a.message_id = CAST(k.id AS BINARY);
UPDATE JSON_TABLE($1, '$[*]' COLUMNS (
        id BIGINT PATH '$.id',
        status VARCHAR(16) CHARACTER SET ascii PATH '$.status',
        error TEXT CHARACTER SET utf8mb4 PATH '$.error',
        backoff BIGINT PATH '$.backoff',
        attempts INT PATH '$.attempts'
    )) AS f
STRAIGHT_JOIN {{schema}}.`{{prefix}}inbox_messages` m FORCE INDEX (PRIMARY) ON m.id = f.id
SET m.status = f.status,
    m.attempts = f.attempts,
    -- A row deferred by its rate limit (pending, no error) keeps the error it had.
    m.last_error = CASE WHEN f.status = 'done' THEN NULL ELSE COALESCE(f.error, m.last_error) END,
    m.done_at = CASE WHEN f.status = 'done' THEN FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) END,
    m.available_at = CASE WHEN f.status = 'pending'
                          THEN FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) + f.backoff
                          ELSE m.available_at END
