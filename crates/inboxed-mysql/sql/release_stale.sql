-- release_stale: the reaper. Rows whose claim died go back to pending, or to dead at
-- max_attempts: those whose lease expired (their worker crashed, hung or lost its
-- connection), and at once, lease or not, those claimed by a worker whose session ended
-- (dead_workers.sql found it). Returns how many it changed.
-- $1 max attempts, $2 limit (of dying rows that pick the processes to judge), $3 now (ms; NULL:
-- the server's clock), $4 dead workers' ids (a JSON array, empty when none)
--
-- The rule of blame is PostgreSQL's (its file explains it): a process is judged whole, by the
-- rows it held, named by claimed_by up to its first '/'; a row held alone is charged its
-- attempt and runs alone from then on, a row held beside others gets its attempt back and a
-- group limit of half as many rows.
--
-- One reaper at a time: the gate is the row 'reaper' of the locks table, taken FOR UPDATE
-- SKIP LOCKED by the first statement and held to the commit (the two statements run in one
-- transaction); a reaper that finds it taken changes nothing and locks no row (the update's
-- selection is false from its start: checked on MariaDB 10.11, where a second session could
-- then lock every stale row with NOWAIT), so no process is split between two reapers'
-- counts. With the gate inside the update instead, each reaper locked its share of the stale
-- rows before it read the gate, and the one that won counted only its share. The stale rows
-- are taken FOR UPDATE SKIP LOCKED, which passes over a row whose late worker is completing it
-- right now; the outer conditions are read again when each row is updated. Derived tables,
-- because MySQL updates no table that a subquery of the same statement reads unless that
-- subquery is materialised (the window function and LIMIT make it so).
SET @inboxed_gate = (
    SELECT COUNT(*) FROM {{schema}}.`{{prefix}}locks`
    WHERE name = 'reaper'
    FOR UPDATE SKIP LOCKED
);
UPDATE {{schema}}.`{{prefix}}inbox_messages` i
JOIN (
    SELECT s.id AS judged_id, s.expired, COUNT(*) OVER (PARTITION BY s.process) AS held_rows
    FROM (
        SELECT id, SUBSTRING_INDEX(coalesce(claimed_by, ''), '/', 1) AS process,
               lease_expires_at < coalesce($3, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)) AS expired
        FROM {{schema}}.`{{prefix}}inbox_messages`
        WHERE @inboxed_gate = 1
          AND status = 'processing'
          AND (lease_expires_at < coalesce($3, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000))
               OR claimed_by IN (
                   SELECT k.id COLLATE utf8mb4_bin
                   FROM JSON_TABLE($4, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k))
        FOR UPDATE SKIP LOCKED
    ) AS s
    WHERE s.process IN (
        SELECT d.process FROM (
            SELECT SUBSTRING_INDEX(coalesce(claimed_by, ''), '/', 1) AS process
            FROM {{schema}}.`{{prefix}}inbox_messages`
            WHERE status = 'processing'
              AND (lease_expires_at < coalesce($3, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000))
                   OR claimed_by IN (
                       SELECT k.id COLLATE utf8mb4_bin
                       FROM JSON_TABLE($4, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k))
            ORDER BY lease_expires_at
            LIMIT $2
        ) AS d
    )
) AS j ON i.id = j.judged_id
SET i.status = CASE WHEN (j.held_rows <= 1 OR j.held_rows > coalesce(i.group_limit, j.held_rows))
                         AND i.attempts >= $1
                    THEN 'dead' ELSE 'pending' END,
    i.attempts = CASE WHEN j.held_rows > 1 AND j.held_rows <= coalesce(i.group_limit, j.held_rows)
                      THEN GREATEST(i.attempts - 1, 0) ELSE i.attempts END,
    i.group_limit = CASE WHEN j.held_rows > 1 THEN GREATEST(j.held_rows DIV 2, 1) ELSE 1 END,
    i.last_error = CONCAT('lease expired (claimed by ', coalesce(i.claimed_by, 'unknown'),
                          IF(j.expired, '', ', whose database session ended'), ')'),
    i.claim_token = NULL,
    i.lease_expires_at = NULL
WHERE i.status = 'processing'
