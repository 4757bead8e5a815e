-- lock_batch: the lock-held claim. Locks up to $2 pending rows of a consumer, oldest first, in
-- the caller's transaction, and keeps them locked through the handlers and the completion:
-- the row lock is the lease. If the worker dies, its connection closes, InnoDB rolls its
-- transaction back, and the rows (still 'pending') are claimable again at once.
-- $1 consumer_name, $2 limit, $3 now (ms; NULL: the server's clock), $4 ordered, $5 park
--
-- SKIP LOCKED passes over rows other workers hold. A plain SELECT, so its subqueries read
-- without locks (claim_batch.sql says why that matters): an earlier row of the aggregate that
-- another worker holds still reads as 'pending', so it holds the later one back. An attempts
-- row means an earlier claim of this row never settled (its worker died): the row runs alone
-- (group_limit 1; the PostgreSQL statement says why).
SELECT i.id, CONVERT(i.message_id USING utf8mb4) AS message_id,
       CONVERT(i.aggregate_id USING utf8mb4) AS aggregate_id, i.message_type, i.correlation_id,
       i.payload, i.attempts,
       CASE WHEN EXISTS (SELECT 1 FROM {{schema}}.`{{prefix}}attempts` a
                         WHERE a.consumer_name = i.consumer_name AND a.message_id = i.message_id)
            THEN 1 END AS group_limit,
       i.headers
FROM {{schema}}.`{{prefix}}inbox_messages` i
    FORCE INDEX (`{{prefix}}inbox_messages_claim_idx`)
WHERE i.consumer_name = $1
  AND i.status = 'pending'
  AND i.available_at <= coalesce($3, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000))
  AND (NOT $4 OR i.aggregate_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM {{schema}}.`{{prefix}}inbox_messages` e
      WHERE e.consumer_name = i.consumer_name
        AND e.aggregate_id = i.aggregate_id
        AND e.id < i.id
        AND e.status <> 'done'
        AND (e.status <> 'dead' OR $5)
  ))
ORDER BY i.available_at, i.id
LIMIT $2
FOR UPDATE SKIP LOCKED
