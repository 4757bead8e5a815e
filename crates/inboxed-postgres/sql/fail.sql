-- fail: records a failed attempt of a claimed row, in its own transaction (the handler's was
-- rolled back). Back to pending after a backoff, or dead when the failure is permanent or the
-- attempts are used up.
-- $1 id, $2 claim token, $3 error, $4 backoff (ms), $5 max attempts, $6 permanent (bool),
-- $7 now (ms; NULL: the database clock)
--
-- Fenced like complete: a worker that lost its claim records nothing. Returns the new status.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = CASE WHEN $6 OR attempts >= $5 THEN 'dead' ELSE 'pending' END,
    available_at = coalesce(to_timestamp($7::float8 / 1000), now()) + $4 * interval '1 millisecond',
    last_error = $3,
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
RETURNING status
