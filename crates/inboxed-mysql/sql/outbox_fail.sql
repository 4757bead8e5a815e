-- outbox_fail: a claimed row whose publish failed: pending again after its backoff, or dead
-- (permanently refused, or out of attempts) with the broker's reason; the new status, or no
-- row when the claim was lost.
-- $1 row id, $2 claim token, $3 error, $4 backoff (ms), $5 max attempts, $6 permanent,
-- $7 now (ms; NULL: the server's clock)
--
-- The row is locked and its new status read first (the row this operation returns), then it
-- is updated under that lock (fail.sql does the same for the inbox).
--! rows
SELECT CASE WHEN $6 OR attempts >= $5 THEN 'dead' ELSE 'pending' END AS status
FROM {{schema}}.`{{prefix}}outbox_messages`
WHERE id = $1 AND claim_token = $2 AND status = 'sending'
FOR UPDATE;
UPDATE {{schema}}.`{{prefix}}outbox_messages`
SET status = CASE WHEN $6 OR attempts >= $5 THEN 'dead' ELSE 'pending' END,
    available_at = coalesce($7, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)) + $4,
    last_error = $3,
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'sending'
