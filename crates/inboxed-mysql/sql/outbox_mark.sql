-- outbox_mark: marks a lock-held batch in its own transaction, before its commit: each
-- published row sent (or deleted, $3), each failed row pending after its backoff or dead, with
-- its attempt count; and the batch's record goes, so that only a batch that never commits
-- leaves one. Rows not in the list (not sent: the broker was unreachable) are left as they are,
-- their attempt not counted, and come free at the commit.
-- $1 claim token, $2 the fates as a JSON array of [id, status (sent | pending | dead), error,
-- backoff (ms), attempts], $3 delete sent rows, $4 relay id
--
-- No fencing is needed: this transaction holds the row locks. NOW(6) is this statement's
-- time, after the publish. Rows are reached by primary key from the list (STRAIGHT_JOIN keeps
-- that order; claim_stamp.sql says why not `id IN (SELECT … FROM JSON_TABLE …)`). The batch's
-- named lock stays until the connection goes back to the pool: a reaper that finds it free
-- after the commit finds no record.
DELETE FROM {{schema}}.`{{prefix}}outbox_unmarked` WHERE token = $1;
DELETE m
FROM JSON_TABLE($2, '$[*]' COLUMNS (id BIGINT PATH '$[0]', status VARCHAR(16) PATH '$[1]')) AS f
STRAIGHT_JOIN {{schema}}.`{{prefix}}outbox_messages` m FORCE INDEX (PRIMARY) ON m.id = f.id
WHERE $3 AND f.status = 'sent';
UPDATE JSON_TABLE($2, '$[*]' COLUMNS (
    id       BIGINT PATH '$[0]',
    status   VARCHAR(16) CHARACTER SET ascii PATH '$[1]',
    error    LONGTEXT CHARACTER SET utf8mb4 PATH '$[2]',
    backoff  BIGINT PATH '$[3]',
    attempts INT PATH '$[4]'
)) AS f
STRAIGHT_JOIN {{schema}}.`{{prefix}}outbox_messages` m FORCE INDEX (PRIMARY) ON m.id = f.id
SET m.status = f.status,
    m.attempts = f.attempts,
    m.last_error = f.error,
    m.claimed_by = $4,
    m.sent_at = CASE WHEN f.status = 'sent' THEN FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) END,
    m.available_at = CASE WHEN f.status = 'pending'
                          THEN FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) + f.backoff
                          ELSE m.available_at END
WHERE NOT ($3 AND f.status = 'sent')
