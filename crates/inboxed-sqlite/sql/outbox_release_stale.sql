-- outbox_release_stale: rows whose relay's lease ran out back to pending, or dead; how many.
-- ?1 max attempts, ?2 limit (of expired claims whose batches are judged), ?3 now (ms; NULL:
-- the clock of this process)
--
-- A batch (a claim token) is judged whole, and a row is charged its attempt only when its
-- batch held it alone; a row held beside others gets its attempt back and may go with at most
-- half as many rows from now on (PostgreSQL's outbox_release_stale.sql says why). SQLite runs
-- a writing statement alone, so no row can be marked while this one runs.
WITH stale AS (
    SELECT id, claim_token FROM {{schema}}."{{prefix}}outbox_messages"
    WHERE status = 'sending' AND claim_token IN (
        SELECT claim_token FROM {{schema}}."{{prefix}}outbox_messages"
        WHERE status = 'sending'
          AND lease_expires_at < coalesce(?3, CAST(unixepoch('subsec') * 1000 AS INTEGER))
        ORDER BY lease_expires_at
        LIMIT ?2
    )
),
held AS (
    SELECT claim_token, count(*) AS n FROM stale GROUP BY claim_token
)
UPDATE {{schema}}."{{prefix}}outbox_messages" AS m
SET status = CASE WHEN (h.n <= 1 OR h.n > coalesce(m.group_limit, h.n)) AND m.attempts >= ?1
                  THEN 'dead' ELSE 'pending' END,
    attempts = CASE WHEN h.n > 1 AND h.n <= coalesce(m.group_limit, h.n)
                    THEN max(m.attempts - 1, 0) ELSE m.attempts END,
    group_limit = max(h.n / 2, 1),
    last_error = 'lease expired: the relay stopped before the broker confirmed'
        || CASE WHEN h.n > 1 THEN ' (in a batch of ' || h.n || ')' ELSE '' END,
    claim_token = NULL,
    lease_expires_at = NULL
FROM stale s
JOIN held h ON h.claim_token = s.claim_token
WHERE m.id = s.id
