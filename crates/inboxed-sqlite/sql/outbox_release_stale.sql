-- outbox_release_stale: rows whose relay's lease ran out back to pending, or dead when they
-- are out of attempts; how many.
-- ?1 max attempts, ?2 limit, ?3 now (ms; NULL: the clock of this process)
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = CASE WHEN attempts >= ?1 THEN 'dead' ELSE 'pending' END,
    last_error = 'lease expired: the relay stopped before the broker confirmed',
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id IN (
    SELECT id FROM {{schema}}."{{prefix}}outbox_messages"
    WHERE status = 'sending' AND lease_expires_at < coalesce(?3, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    ORDER BY lease_expires_at
    LIMIT ?2
)
