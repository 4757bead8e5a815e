-- release_stale: the reaper. Rows whose claim died go back to pending: those whose lease
-- expired (their worker crashed, hung or lost its connection), and at once, lease or not,
-- those claimed by a worker whose database session ended (dead_workers found it).
-- $1 max attempts, $2 limit, $3 now (ms; NULL: the database clock), $4 dead workers' ids
-- (text[], empty when none)
--
-- Who is to blame is read from what the dying claim still held. A row held alone was what
-- its worker was doing when it died: its attempt (counted at claim time) stands, at
-- max_attempts it goes dead, and it runs alone from now on. A row held beside others may not
-- be the cause at all: its attempt is given back, and it may be claimed with at most half as
-- many rows as the claim held (group_limit, migration 0010); a row that kills its worker is
-- halved down to a group of one, and charged from then on. available_at is left as it was (the row was available when
-- claimed). Bounded, and SKIP LOCKED so it never waits on a live claim. The count of rows a
-- claim held is taken over the table, not over this pass: a claim larger than the limit is
-- still seen whole by its first pass.
WITH clock AS (
    SELECT coalesce(to_timestamp($3::float8 / 1000), now()) AS now
),
stale AS (
    SELECT i.id, i.claim_token
    FROM {{schema}}."{{prefix}}inbox_messages" i, clock
    WHERE i.status = 'processing'
      AND (i.lease_expires_at < clock.now OR i.claimed_by = ANY($4::text[]))
    ORDER BY i.lease_expires_at
    LIMIT $2
    FOR UPDATE OF i SKIP LOCKED
),
held AS (
    SELECT o.claim_token, count(*) AS n
    FROM {{schema}}."{{prefix}}inbox_messages" o
    WHERE o.status = 'processing' AND o.claim_token IN (SELECT claim_token FROM stale)
    GROUP BY o.claim_token
)
UPDATE {{schema}}."{{prefix}}inbox_messages" m
SET status = CASE WHEN coalesce(h.n, 1) <= 1 AND m.attempts >= $1 THEN 'dead' ELSE 'pending' END,
    attempts = CASE WHEN h.n > 1 THEN greatest(m.attempts - 1, 0) ELSE m.attempts END,
    group_limit = CASE WHEN h.n > 1 THEN greatest(h.n / 2, 1)::integer ELSE 1 END,
    last_error = 'lease expired (claimed by ' || coalesce(m.claimed_by, 'unknown')
        || CASE WHEN m.claimed_by = ANY($4::text[]) THEN ', whose database session ended'
                ELSE '' END || ')',
    claim_token = NULL,
    lease_expires_at = NULL
FROM stale s
LEFT JOIN held h ON h.claim_token = s.claim_token
WHERE m.id = s.id
