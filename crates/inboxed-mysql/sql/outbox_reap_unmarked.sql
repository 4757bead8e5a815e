-- outbox_reap_unmarked: counts the attempt of every lock-held batch that was never marked (its
-- relay died, or its transaction failed) and halves the batch; how many rows it judged.
-- $1 max attempts
--
-- The rule is PostgreSQL's (its file explains it): a record whose named lock is free belongs
-- to a batch whose connection let go of it (closed, or back in the pool after the transaction
-- ended); had the batch committed, its marking statement would have deleted the record. A
-- row its batch held alone is charged its attempt (dead at max_attempts); every row may go
-- with at most half as many rows as its batch held. A row in several records is judged once by
-- all of them. One outbox reaper at a time, on the row 'outbox_reaper' of the locks table (as
-- outbox_release_stale.sql). Records being marked right now are passed over (SKIP LOCKED);
-- rows another relay holds right now are waited for and judged by their state after it.
SET @inboxed_gate = (
    SELECT COUNT(*) FROM {{schema}}.`{{prefix}}locks`
    WHERE name = 'outbox_reaper'
    FOR UPDATE SKIP LOCKED
);
-- The orphaned records' rows, one [token, row id, batch size, relay] each.
SET @inboxed_orphans = (
    SELECT JSON_ARRAYAGG(JSON_ARRAY(HEX(u.token), i.id, JSON_LENGTH(u.ids), u.relay))
    FROM (
        SELECT token, ids, relay FROM {{schema}}.`{{prefix}}outbox_unmarked`
        WHERE @inboxed_gate = 1 AND IS_FREE_LOCK(lock_name) = 1
        FOR UPDATE SKIP LOCKED
    ) AS u
    CROSS JOIN JSON_TABLE(u.ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS i
);
DELETE u
FROM (
    SELECT DISTINCT o.token
    FROM JSON_TABLE(coalesce(@inboxed_orphans, '[]'), '$[*]' COLUMNS (
        token VARCHAR(32) CHARACTER SET ascii PATH '$[0]'
    )) AS o
) AS o
STRAIGHT_JOIN {{schema}}.`{{prefix}}outbox_unmarked` u ON u.token = UNHEX(o.token);
-- From the judged ids to the rows by primary key (STRAIGHT_JOIN keeps that order): planned the
-- other way, the update read the whole table and waited on every row a live batch holds.
UPDATE (
    SELECT o.id, MIN(o.n) AS n, SUM(o.n <= 1) AS alone, MIN(o.relay) AS relay
    FROM JSON_TABLE(coalesce(@inboxed_orphans, '[]'), '$[*]' COLUMNS (
        id    BIGINT PATH '$[1]',
        n     INT PATH '$[2]',
        relay LONGTEXT CHARACTER SET utf8mb4 PATH '$[3]'
    )) AS o
    GROUP BY o.id
) AS j
STRAIGHT_JOIN {{schema}}.`{{prefix}}outbox_messages` m FORCE INDEX (PRIMARY) ON m.id = j.id
SET m.status = CASE WHEN j.alone > 0 AND m.attempts + j.alone >= $1 THEN 'dead'
                    ELSE 'pending' END,
    m.attempts = m.attempts + j.alone,
    m.group_limit = GREATEST(j.n DIV 2, 1),
    m.last_error = CONCAT('relay ', j.relay, ' stopped while publishing this row',
                          CASE WHEN j.n > 1 THEN CONCAT(' in a batch of ', j.n) ELSE '' END)
WHERE m.status = 'pending'
