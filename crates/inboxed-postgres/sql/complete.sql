-- complete: marks a claimed row done, inside the transaction of its handler.
-- $1 id, $2 claim token
--
-- Fenced: only the current claim's token matches. Zero rows affected means the lease was
-- reaped (and perhaps re-claimed by another worker); the caller then rolls back its business
-- writes instead of committing them a second time.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'done', done_at = now(), claim_token = NULL, lease_expires_at = NULL,
    last_error = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
