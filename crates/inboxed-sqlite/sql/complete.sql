-- complete: marks a claimed row done inside its handler's transaction. Fenced by the claim
-- token (see the PostgreSQL version). ?1 id, ?2 claim token
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'done', done_at = CAST(unixepoch('subsec') * 1000 AS INTEGER), claim_token = NULL,
    lease_expires_at = NULL, last_error = NULL
WHERE id = ?1 AND claim_token = ?2 AND status = 'processing'
