-- complete: marks a claimed row done inside its handler's transaction, fenced by the claim
-- token: a worker whose lease was reaped and whose row was claimed again changes nothing.
-- $1 id, $2 claim token
UPDATE {{schema}}.`{{prefix}}inbox_messages`
SET status = 'done', done_at = FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), claim_token = NULL,
    lease_expires_at = NULL, last_error = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
