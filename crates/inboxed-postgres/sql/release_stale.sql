-- release_stale: the reaper. Rows whose claim died go back to pending: those whose lease
-- expired (their worker crashed, hung or lost its connection), and at once, lease or not,
-- those claimed by a worker whose database session ended (dead_workers found it).
-- $1 max attempts, $2 limit (of dying rows that pick the processes to judge), $3 now (ms;
-- NULL: the database clock), $4 dead workers' ids (text[], empty when none)
--
-- Who is to blame is read from what the dying process still held: every processing row whose
-- claimed_by names it up to its first '/' (the Rust worker writes <pid>-<nonce>/<worker>, so
-- all the claims of all the workers of one process die together; another worker's name is its
-- own process). A row its process held alone was what it was doing when it died: its attempt
-- (counted at claim time) stands, at max_attempts it goes dead, and it runs alone from now on
-- (group_limit 1). A row held beside others may not be the cause at all: its attempt is given
-- back, and it may be run with at most half as many rows as the process held (group_limit,
-- migration 0010); a row that kills its worker is halved down to a group of one, and charged
-- from then on. Except when the process held more rows than the row's group_limit allowed:
-- its worker ran the row beside more (a worker of another language that ignores the limit, or
-- a Rust worker whose wait for its turn alone ran out), so the halving cannot corner
-- anything, and the attempt stands.
--
-- A process is judged whole: the limit picks dying rows, and every dying row of their
-- processes is returned in this statement, however many. One reaper at a time (a transaction
-- lock; another reaper's pass meanwhile returns nothing and the next one catches up), so that
-- no process is split between two reapers' counts. SKIP LOCKED passes over a row whose
-- (late, hung) worker is completing it right now. available_at is left as it was (the row was
-- available when claimed).
WITH clock AS (
    SELECT coalesce(to_timestamp($3::float8 / 1000), now()) AS now
),
gate AS (
    SELECT pg_try_advisory_xact_lock(hashtextextended('{{schema}}.{{prefix}}reaper', 0)) AS mine
),
dying AS (
    SELECT split_part(coalesce(i.claimed_by, ''), '/', 1) AS process
    FROM {{schema}}."{{prefix}}inbox_messages" i, clock
    WHERE i.status = 'processing'
      AND (i.lease_expires_at < clock.now OR i.claimed_by = ANY($4::text[]))
      AND (SELECT mine FROM gate)
    ORDER BY i.lease_expires_at
    LIMIT $2
),
stale AS (
    SELECT i.id, split_part(coalesce(i.claimed_by, ''), '/', 1) AS process
    FROM {{schema}}."{{prefix}}inbox_messages" i, clock
    WHERE i.status = 'processing'
      AND (i.lease_expires_at < clock.now OR i.claimed_by = ANY($4::text[]))
      AND split_part(coalesce(i.claimed_by, ''), '/', 1) IN (SELECT process FROM dying)
    FOR UPDATE OF i SKIP LOCKED
),
held AS (
    SELECT process, count(*) AS n FROM stale GROUP BY process
)
UPDATE {{schema}}."{{prefix}}inbox_messages" m
SET status = CASE WHEN (h.n <= 1 OR h.n > coalesce(m.group_limit, h.n)) AND m.attempts >= $1
                  THEN 'dead' ELSE 'pending' END,
    attempts = CASE WHEN h.n > 1 AND h.n <= coalesce(m.group_limit, h.n)
                    THEN greatest(m.attempts - 1, 0) ELSE m.attempts END,
    group_limit = CASE WHEN h.n > 1 THEN greatest(h.n / 2, 1)::integer ELSE 1 END,
    last_error = 'lease expired (claimed by ' || coalesce(m.claimed_by, 'unknown')
        || CASE WHEN m.claimed_by = ANY($4::text[]) THEN ', whose database session ended'
                ELSE '' END || ')',
    claim_token = NULL,
    lease_expires_at = NULL
FROM stale s
JOIN held h ON h.process = s.process
WHERE m.id = s.id
