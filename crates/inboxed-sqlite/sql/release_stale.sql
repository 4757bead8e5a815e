-- release_stale: the reaper (see the PostgreSQL version, whose rule of blame this follows: a
-- process is judged whole, by the rows it held, named by claimed_by up to its first '/').
-- ?1 max attempts, ?2 limit (of dying rows that pick the processes), ?3 now (ms; NULL: the
-- clock of this process). SQLite has no sessions to say a worker died, so only expired leases
-- are returned; its single writer keeps reapers from splitting a process.
WITH dying (dying_process) AS (
    SELECT CASE WHEN instr(coalesce(claimed_by, ''), '/') > 0
                THEN substr(claimed_by, 1, instr(claimed_by, '/') - 1)
                ELSE coalesce(claimed_by, '') END
    FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'processing'
      AND lease_expires_at < coalesce(?3, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    ORDER BY lease_expires_at
    LIMIT ?2
),
stale (stale_id, stale_process) AS (
    SELECT id, CASE WHEN instr(coalesce(claimed_by, ''), '/') > 0
                    THEN substr(claimed_by, 1, instr(claimed_by, '/') - 1)
                    ELSE coalesce(claimed_by, '') END
    FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'processing'
      AND lease_expires_at < coalesce(?3, CAST(unixepoch('subsec') * 1000 AS INTEGER))
),
judged (judged_id, held_rows) AS (
    SELECT stale_id, count(*) OVER (PARTITION BY stale_process)
    FROM stale
    WHERE stale_process IN (SELECT dying_process FROM dying)
)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = CASE WHEN (held_rows <= 1 OR held_rows > coalesce(group_limit, held_rows))
                       AND attempts >= ?1
                  THEN 'dead' ELSE 'pending' END,
    attempts = CASE WHEN held_rows > 1 AND held_rows <= coalesce(group_limit, held_rows)
                    THEN max(attempts - 1, 0) ELSE attempts END,
    group_limit = CASE WHEN held_rows > 1 THEN max(held_rows / 2, 1) ELSE 1 END,
    last_error = 'lease expired (claimed by ' || coalesce(claimed_by, 'unknown') || ')',
    claim_token = NULL,
    lease_expires_at = NULL
FROM judged
WHERE id = judged_id
