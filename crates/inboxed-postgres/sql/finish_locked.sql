-- finish_locked: settles the rows of a lock-held batch inside its transaction: each row done,
-- or failed (back to pending after a backoff, or dead), with its attempt count; the rows'
-- attempt counters are forgotten. No fencing is needed: this transaction holds the row locks.
-- $1 ids (bigint[]), $2 statuses (text[]: done | pending | dead), $3 errors (text[]),
-- $4 backoffs (bigint[], ms), $5 attempts (int[]), $6 consumer_name, $7 message ids (text[])
WITH forget AS (
    DELETE FROM {{schema}}."{{prefix}}attempts"
    WHERE consumer_name = $6 AND message_id = ANY($7)
),
fate AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::int[])
        AS f(id, status, error, backoff, attempts)
)
UPDATE {{schema}}."{{prefix}}inbox_messages" m
SET status = fate.status,
    attempts = fate.attempts,
    -- A row deferred by its rate limit (pending, no error) keeps the error it had.
    last_error = CASE WHEN fate.status = 'done' THEN NULL ELSE coalesce(fate.error, m.last_error) END,
    -- clock_timestamp(), not now(): now() is the batch transaction's start, which would cut
    -- the backoff short by however long the batch ran.
    done_at = CASE WHEN fate.status = 'done' THEN clock_timestamp() END,
    available_at = CASE WHEN fate.status = 'pending'
                        THEN clock_timestamp() + fate.backoff * interval '1 millisecond'
                        ELSE m.available_at END
FROM fate
WHERE m.id = fate.id
