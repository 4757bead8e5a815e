-- outbox_reap_unmarked: counts the attempt of every lock-held batch that was never marked (its
-- relay died, or its transaction failed) and halves the batch; how many rows it judged.
-- $1 max attempts
--
-- A record whose lock key can be taken belongs to a transaction that is over; had it
-- committed, its marking statement would have deleted the record with it. Its rows are still
-- 'pending' (their transaction rolled back), unless another relay has published them since.
-- Judged as the inbox's reaper judges a dead worker's rows: a row its batch held alone was
-- what the relay was publishing when it died: its attempt is counted, at max_attempts it is
-- dead, and it goes alone from now on. A row held beside others may not be the cause: its
-- attempt is not counted, and it may go with at most half as many rows as the batch held
-- (group_limit), so a row that kills its relay is halved down to a batch of one, and charged
-- from then on. One reaper at a time (a transaction lock), so that no record is judged twice.
-- A row in several records (its batches died one after another before a reaper came) is
-- judged once by all of them: charged once for each record that held it alone, limited by the
-- smallest of its batches.
-- Rows another relay holds right now are waited for (a batch's time) and judged by their
-- state after it.
WITH gate AS (
    SELECT pg_try_advisory_xact_lock(hashtextextended('{{schema}}.{{prefix}}outbox_reaper', 0))
        AS mine
),
orphans AS (
    DELETE FROM {{schema}}."{{prefix}}outbox_unmarked" u
    WHERE (SELECT mine FROM gate) AND pg_try_advisory_xact_lock(u.lock_key)
    RETURNING u.ids, u.relay
),
held AS (
    SELECT unnest(o.ids) AS id, cardinality(o.ids) AS n, o.relay FROM orphans o
),
judged AS (
    SELECT id, min(n) AS n, count(*) FILTER (WHERE n <= 1) AS alone, min(relay) AS relay
    FROM held
    GROUP BY id
)
UPDATE {{schema}}."{{prefix}}outbox_messages" m
SET status = CASE WHEN j.alone > 0 AND m.attempts + j.alone >= $1 THEN 'dead' ELSE 'pending' END,
    attempts = m.attempts + j.alone,
    group_limit = greatest(j.n / 2, 1)::integer,
    last_error = 'relay ' || j.relay || ' stopped while publishing this row'
        || CASE WHEN j.n > 1 THEN ' in a batch of ' || j.n ELSE '' END
FROM judged j
WHERE m.id = j.id AND m.status = 'pending'
