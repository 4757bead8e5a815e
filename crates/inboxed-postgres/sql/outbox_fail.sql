-- outbox_fail: a claimed row whose publish failed: pending again after its backoff, or dead
-- (permanently refused, or out of attempts) with the broker's reason; the new status, or no
-- row when the claim was lost.
-- $1 row id, $2 claim token, $3 error, $4 backoff (ms), $5 max attempts, $6 permanent,
-- $7 now (ms since the epoch; NULL: the database clock)
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = CASE WHEN $6 OR attempts >= $5 THEN 'dead' ELSE 'pending' END,
    available_at = coalesce(to_timestamp($7::float8 / 1000), now()) + $4 * interval '1 millisecond',
    last_error = $3,
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'sending'
RETURNING status
