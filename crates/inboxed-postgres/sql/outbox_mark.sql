-- outbox_mark: marks a lock-held batch in its own transaction, before its commit: each
-- published row sent (or deleted, $7), each failed row pending after its backoff or dead, with
-- its attempt count; and the batch's record goes, so that only a batch that never commits
-- leaves one. Rows not in the lists (not sent: the broker was unreachable) are left as they
-- are, their attempt not counted, and come free at the commit.
-- $1 claim token, $2 ids (bigint[]), $3 statuses (text[]: sent | pending | dead),
-- $4 errors (text[]), $5 backoffs (bigint[], ms), $6 attempts (int[]), $7 delete sent rows,
-- $8 relay id
--
-- No fencing is needed: this transaction holds the row locks. clock_timestamp(), not now():
-- now() is the transaction's start, before the publish.
WITH record AS (
    DELETE FROM {{schema}}."{{prefix}}outbox_unmarked" WHERE token = $1
),
fate AS (
    SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::int[])
        AS f(id, status, error, backoff, attempts)
),
gone AS (
    DELETE FROM {{schema}}."{{prefix}}outbox_messages"
    WHERE $7 AND id IN (SELECT id FROM fate WHERE status = 'sent')
)
UPDATE {{schema}}."{{prefix}}outbox_messages" m
SET status = fate.status,
    attempts = fate.attempts,
    last_error = fate.error,
    claimed_by = $8,
    sent_at = CASE WHEN fate.status = 'sent' THEN clock_timestamp() END,
    available_at = CASE WHEN fate.status = 'pending'
                        THEN clock_timestamp() + fate.backoff * interval '1 millisecond'
                        ELSE m.available_at END
FROM fate
WHERE m.id = fate.id AND NOT ($7 AND fate.status = 'sent')
