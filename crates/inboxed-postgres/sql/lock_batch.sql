-- lock_batch: the lock-held claim. Locks up to $2 pending rows of a consumer, oldest first, in
-- the caller's transaction, and keeps them locked through the handlers and the completion:
-- the row lock is the lease. If the worker dies, its connection closes, the locks go, and the
-- rows (still 'pending') are claimable again at once; no token, heartbeat or reaper.
-- $1 consumer_name, $2 limit, $3 now (ms; NULL: the database clock), $4 ordered, $5 park
--
-- SKIP LOCKED passes over rows other workers hold. The ordered-mode rule is claim_batch's: an
-- earlier row of the aggregate that another worker holds is still 'pending', so it blocks.
-- Ordering by availability, which only the claim index provides, keeps stale statistics from
-- walking the primary key through done rows (see claim_batch).
-- An attempts row means an earlier claim of this row never settled: its worker died, and the
-- row may be why, so it comes back with a group_limit of 1 and runs alone (a lease claim's
-- group_limit in the column does not apply here: no reaper judged a lock-held claim). It is
-- probed per returned row, not joined: a join read every attempts entry of the consumer, dead
-- ones included, on each claim.
SELECT i.id, i.message_id, i.aggregate_id, i.message_type, i.correlation_id, i.payload,
       i.attempts,
       CASE WHEN EXISTS (SELECT 1 FROM {{schema}}."{{prefix}}attempts" a
                         WHERE a.consumer_name = i.consumer_name AND a.message_id = i.message_id)
            THEN 1 END AS group_limit,
       i.headers
FROM {{schema}}."{{prefix}}inbox_messages" i
WHERE i.consumer_name = $1
  AND i.status = 'pending'
  AND i.available_at <= coalesce(to_timestamp($3::float8 / 1000), now())
  AND (NOT $4 OR i.aggregate_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM {{schema}}."{{prefix}}inbox_messages" e
      WHERE e.consumer_name = i.consumer_name
        AND e.aggregate_id = i.aggregate_id
        AND e.id < i.id
        AND e.status <> 'done'
        AND (e.status <> 'dead' OR $5)
  ))
ORDER BY i.available_at, i.id
LIMIT $2
FOR UPDATE OF i SKIP LOCKED
