-- claim_batch: claims up to $4 pending rows of a consumer, oldest first, under a lease.
-- $1 consumer_name, $2 worker id, $3 claim token, $4 limit, $5 lease (ms),
-- $6 now (ms since the epoch; NULL: the database clock), $7 ordered (bool), $8 park (bool)
--
-- FOR UPDATE SKIP LOCKED lets concurrent workers pass over rows another worker is claiming
-- instead of queueing behind it. Attempts are counted here, before any handler runs.
-- Ordered mode: a row is only eligible when no earlier row of its aggregate is unfinished
-- (pending, processing, or dead when parking). An earlier row that another worker is claiming
-- right now still looks pending to this statement, so it blocks: the check errs on the side of
-- order. The returned order is not guaranteed; the worker sorts by id. `group_limit`, set when
-- a claim holding the row died (release_stale), is how many rows at most the worker may run it
-- with; NULL for a row no dead claim held.
--
-- Written so that stale statistics cannot turn a claim into a scan of done rows (a queue table
-- churns faster than autovacuum analyzes it, and a cached generic plan outlives the statistics
-- it was made with): ordering by availability is something only the claim index provides
-- (see migration 0003), and `id = ANY(ARRAY(...))` makes the UPDATE find the claimed rows
-- through the primary key instead of hashing the whole table (with 8,000 done rows and no
-- statistics the join form took 2.0 ms per claim, this one 0.2 ms). Oldest available first:
-- for fresh rows that is arrival order; a retried row queues from the end of its backoff.
-- The clock is written out where it is used, not joined from a one-row CTE: a nested loop
-- keeps only its outer side's order, so the join made the planner sort every available
-- pending row on each claim (53,400 of them, spilling to disk, 0.56 s per claim in a 100,000
-- row backlog) instead of reading the claim index in order and stopping at the limit. The
-- expression is the same in every place and now() is the transaction's, so the rows are
-- claimed, stamped and leased at one instant as before.
WITH candidates AS (
    SELECT i.id
    FROM {{schema}}."{{prefix}}inbox_messages" i
    WHERE i.consumer_name = $1
      AND i.status = 'pending'
      AND i.available_at <= coalesce(to_timestamp($6::float8 / 1000), now())
      AND (NOT $7 OR i.aggregate_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM {{schema}}."{{prefix}}inbox_messages" e
          WHERE e.consumer_name = i.consumer_name
            AND e.aggregate_id = i.aggregate_id
            AND e.id < i.id
            AND e.status <> 'done'
            AND (e.status <> 'dead' OR $8)
      ))
    ORDER BY i.available_at, i.id
    LIMIT $4
    FOR UPDATE OF i SKIP LOCKED
)
UPDATE {{schema}}."{{prefix}}inbox_messages" m
SET status = 'processing',
    attempts = m.attempts + 1,
    claimed_at = coalesce(to_timestamp($6::float8 / 1000), now()),
    claimed_by = $2,
    lease_expires_at = coalesce(to_timestamp($6::float8 / 1000), now()) + $5 * interval '1 millisecond',
    claim_token = $3
WHERE m.id = ANY(ARRAY(SELECT id FROM candidates))
RETURNING m.id, m.message_id, m.aggregate_id, m.message_type, m.correlation_id, m.payload,
          m.attempts, m.group_limit, m.headers
