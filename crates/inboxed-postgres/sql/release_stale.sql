-- release_stale: the reaper. Rows whose lease expired (their worker crashed, hung or lost its
-- connection) go back to pending, or to dead once their attempts are used up; the attempt
-- was counted at claim time, and available_at is left as it was (the row was available when
-- claimed). Bounded, and SKIP LOCKED so it never waits on a live claim.
-- $1 max attempts, $2 limit, $3 now (ms; NULL: the database clock)
WITH clock AS (
    SELECT coalesce(to_timestamp($3::float8 / 1000), now()) AS now
),
stale AS (
    SELECT i.id
    FROM {{schema}}."{{prefix}}inbox_messages" i, clock
    WHERE i.status = 'processing' AND i.lease_expires_at < clock.now
    ORDER BY i.lease_expires_at
    LIMIT $2
    FOR UPDATE OF i SKIP LOCKED
)
UPDATE {{schema}}."{{prefix}}inbox_messages" m
SET status = CASE WHEN m.attempts >= $1 THEN 'dead' ELSE 'pending' END,
    last_error = 'lease expired (claimed by ' || coalesce(m.claimed_by, 'unknown') || ')',
    claim_token = NULL,
    lease_expires_at = NULL
FROM stale s
WHERE m.id = s.id
