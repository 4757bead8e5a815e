-- fail: records a failed attempt of a claimed row in its own transaction; fenced.
-- ?1 id, ?2 claim token, ?3 error, ?4 backoff (ms), ?5 max attempts, ?6 permanent,
-- ?7 now (ms; NULL: the clock of this process). Returns the new status.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = CASE WHEN ?6 OR attempts >= ?5 THEN 'dead' ELSE 'pending' END,
    available_at = coalesce(?7, CAST(unixepoch('subsec') * 1000 AS INTEGER)) + ?4,
    last_error = ?3,
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id = ?1 AND claim_token = ?2 AND status = 'processing'
RETURNING status
