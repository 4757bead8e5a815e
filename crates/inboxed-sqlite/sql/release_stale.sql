-- release_stale: the reaper (see the PostgreSQL version). ?1 max attempts, ?2 limit,
-- ?3 now (ms; NULL: the clock of this process)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = CASE WHEN attempts >= ?1 THEN 'dead' ELSE 'pending' END,
    last_error = 'lease expired (claimed by ' || coalesce(claimed_by, 'unknown') || ')',
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id IN (
    SELECT id FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'processing'
      AND lease_expires_at < coalesce(?3, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    ORDER BY lease_expires_at
    LIMIT ?2
)
