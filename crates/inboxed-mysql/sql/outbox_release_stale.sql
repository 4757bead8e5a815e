-- outbox_release_stale: rows whose relay's lease ran out back to pending, or dead; how many.
-- $1 max attempts, $2 limit (of expired claims whose batches are judged), $3 now (ms; NULL:
-- the server's clock)
--
-- The rule of blame is PostgreSQL's (its file explains it): a batch (a claim token) is judged
-- whole, and a row is charged its attempt only when its batch held it alone; a row held beside
-- others gets its attempt back and may go with at most half as many rows from now on.
--
-- One outbox reaper at a time, as release_stale.sql for the inbox (which says why the gate is
-- taken first): the gate is the row 'outbox_reaper' of the locks table. The stale rows are
-- taken FOR UPDATE SKIP LOCKED, which passes over a row its late relay is marking right now. Derived tables, because MySQL
-- updates no table that a subquery of the same statement reads unless that subquery is
-- materialised (the window function and LIMIT make it so).
SET @inboxed_gate = (
    SELECT COUNT(*) FROM {{schema}}.`{{prefix}}locks`
    WHERE name = 'outbox_reaper'
    FOR UPDATE SKIP LOCKED
);
UPDATE {{schema}}.`{{prefix}}outbox_messages` m
JOIN (
    SELECT s.id AS judged_id, COUNT(*) OVER (PARTITION BY s.claim_token) AS held_rows
    FROM (
        SELECT id, claim_token
        FROM {{schema}}.`{{prefix}}outbox_messages`
        WHERE @inboxed_gate = 1
          AND status = 'sending'
          AND lease_expires_at < coalesce($3, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000))
        FOR UPDATE SKIP LOCKED
    ) AS s
    WHERE s.claim_token IN (
        SELECT d.claim_token FROM (
            SELECT claim_token
            FROM {{schema}}.`{{prefix}}outbox_messages`
            WHERE status = 'sending'
              AND lease_expires_at < coalesce($3, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000))
            ORDER BY lease_expires_at
            LIMIT $2
        ) AS d
    )
) AS j ON m.id = j.judged_id
SET m.status = CASE WHEN (j.held_rows <= 1 OR j.held_rows > coalesce(m.group_limit, j.held_rows))
                         AND m.attempts >= $1
                    THEN 'dead' ELSE 'pending' END,
    m.attempts = CASE WHEN j.held_rows > 1 AND j.held_rows <= coalesce(m.group_limit, j.held_rows)
                      THEN GREATEST(m.attempts - 1, 0) ELSE m.attempts END,
    m.group_limit = GREATEST(j.held_rows DIV 2, 1),
    m.last_error = CONCAT('lease expired: the relay stopped before the broker confirmed',
                          CASE WHEN j.held_rows > 1
                               THEN CONCAT(' (in a batch of ', j.held_rows, ')') ELSE '' END),
    m.claim_token = NULL,
    m.lease_expires_at = NULL
WHERE m.status = 'sending'
