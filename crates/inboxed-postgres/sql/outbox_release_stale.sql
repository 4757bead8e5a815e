-- outbox_release_stale: rows whose relay's lease ran out (it died, or hung) back to pending,
-- or dead when they are out of attempts (a row whose publish kills its relay); how many.
-- $1 max attempts, $2 limit, $3 now (ms since the epoch; NULL: the database clock)
--
-- SKIP LOCKED: rows another statement is settling right now are left for the next pass.
WITH stale AS (
    SELECT id
    FROM {{schema}}."{{prefix}}outbox_messages"
    WHERE status = 'sending'
      AND lease_expires_at < coalesce(to_timestamp($3::float8 / 1000), now())
    ORDER BY lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}."{{prefix}}outbox_messages" m
SET status = CASE WHEN m.attempts >= $1 THEN 'dead' ELSE 'pending' END,
    last_error = 'lease expired: the relay stopped before the broker confirmed',
    claim_token = NULL,
    lease_expires_at = NULL
WHERE m.id = ANY(ARRAY(SELECT id FROM stale))
