-- release_stale: the reaper (see the PostgreSQL version, whose rule of blame this follows).
-- ?1 max attempts, ?2 limit, ?3 now (ms; NULL: the clock of this process). SQLite has no
-- sessions to say a worker died, so only expired leases are returned.
WITH stale (stale_id, stale_token) AS (
    SELECT id, claim_token FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'processing'
      AND lease_expires_at < coalesce(?3, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    ORDER BY lease_expires_at
    LIMIT ?2
),
held (held_token, held_rows) AS (
    SELECT claim_token, count(*) FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'processing' AND claim_token IN (SELECT stale_token FROM stale)
    GROUP BY claim_token
)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = CASE WHEN coalesce(held_rows, 1) <= 1 AND attempts >= ?1 THEN 'dead'
                  ELSE 'pending' END,
    attempts = CASE WHEN held_rows > 1 THEN max(attempts - 1, 0) ELSE attempts END,
    group_limit = CASE WHEN held_rows > 1 THEN max(held_rows / 2, 1) ELSE 1 END,
    last_error = 'lease expired (claimed by ' || coalesce(claimed_by, 'unknown') || ')',
    claim_token = NULL,
    lease_expires_at = NULL
FROM stale LEFT JOIN held ON held_token = stale_token
WHERE id = stale_id
