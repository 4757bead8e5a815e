-- outbox_release_stale: rows whose relay's lease ran out (it died, or hung) back to pending,
-- or dead; how many.
-- $1 max attempts, $2 limit (of expired claims whose batches are judged), $3 now (ms since the
-- epoch; NULL: the database clock)
--
-- A batch (a claim token) is judged whole, as the inbox's reaper judges a dead worker: the
-- limit picks expired batches, and every row of theirs still sending is returned. A row its
-- batch held alone was what the relay was publishing when it stopped: its attempt (counted at
-- the claim) stands, at max_attempts it is dead, and it goes alone from now on. A row held
-- beside others may not be the cause: its attempt is given back, and it may go with at most
-- half as many rows (group_limit), so a row that kills its relay is halved down to a batch of
-- one instead of taking the rest of its batch with it to the dead state. Except when the batch
-- held more rows than a row's group_limit allowed: its relay ignored the limit (one older than
-- migration 0013), so the halving cannot corner anything, and the attempt stands as before.
-- One reaper at a time (a transaction lock; another reaper's pass meanwhile returns nothing and
-- the next one catches up), so that no batch is split between two reapers' counts, where a
-- part of one row would look held alone. SKIP LOCKED: rows another statement is marking right
-- now are left for the next pass.
WITH gate AS (
    SELECT pg_try_advisory_xact_lock(hashtextextended('{{schema}}.{{prefix}}outbox_reaper', 1))
        AS mine
),
dying AS (
    SELECT DISTINCT claim_token
    FROM (
        SELECT claim_token
        FROM {{schema}}."{{prefix}}outbox_messages"
        WHERE status = 'sending'
          AND lease_expires_at < coalesce(to_timestamp($3::float8 / 1000), now())
          AND (SELECT mine FROM gate)
        ORDER BY lease_expires_at
        LIMIT $2
    ) expired
),
stale AS (
    SELECT o.id, o.claim_token
    FROM {{schema}}."{{prefix}}outbox_messages" o
    WHERE o.status = 'sending' AND o.claim_token IN (SELECT claim_token FROM dying)
    FOR UPDATE OF o SKIP LOCKED
),
held AS (
    SELECT claim_token, count(*) AS n FROM stale GROUP BY claim_token
)
UPDATE {{schema}}."{{prefix}}outbox_messages" m
SET status = CASE WHEN (h.n <= 1 OR h.n > coalesce(m.group_limit, h.n)) AND m.attempts >= $1
                  THEN 'dead' ELSE 'pending' END,
    attempts = CASE WHEN h.n > 1 AND h.n <= coalesce(m.group_limit, h.n)
                    THEN greatest(m.attempts - 1, 0) ELSE m.attempts END,
    group_limit = greatest(h.n / 2, 1)::integer,
    last_error = 'lease expired: the relay stopped before the broker confirmed'
        || CASE WHEN h.n > 1 THEN ' (in a batch of ' || h.n || ')' ELSE '' END,
    claim_token = NULL,
    lease_expires_at = NULL
FROM stale s
JOIN held h ON h.claim_token = s.claim_token
WHERE m.id = s.id
