-- claim_batch: the first of a claim's two statements, in a transaction of its own: selects and
-- locks up to $4 pending rows of a consumer, in order of availability, and returns them as
-- claimed (their attempt counted); claim_stamp.sql then marks them claimed.
-- $1 consumer_name, $2 worker id, $3 claim token, $4 limit, $5 lease (ms), $6 now (ms; NULL:
-- the server's clock), $7 ordered, $8 park ($2, $3 and $5 are claim_stamp's)
--
-- FOR UPDATE SKIP LOCKED: concurrent workers pass over each other's rows instead of waiting.
-- Through the claim index, in its order, so that the read stops at the limit: planned as a
-- scan and a sort instead (as MariaDB did on a 10-row table), the locking read locked every
-- pending row before the sort, and a concurrent claim skipped them all and got none.
-- A plain SELECT, not an UPDATE joined to it: in an UPDATE, InnoDB takes a shared lock on every
-- row a subquery reads, so the ordered mode's check of earlier rows of the aggregate waited on
-- rows other claims held, and two claims deadlocked (1213) under eight workers; here that check
-- reads without locks, as it should (an earlier row claimed but uncommitted still reads as
-- pending, which holds the later one back). Under READ COMMITTED (the store's connections)
-- the claim locks no gaps: producers' inserts go on. The ordered-mode rule and `group_limit`
-- are the PostgreSQL ones. Keys are read back as text (the envelope's ids are
-- UTF-8; the columns are bytes, compared exactly).
SELECT i.id, CONVERT(i.message_id USING utf8mb4) AS message_id,
       CONVERT(i.aggregate_id USING utf8mb4) AS aggregate_id, i.message_type, i.correlation_id,
       i.payload, i.attempts + 1 AS attempts, i.group_limit, i.headers
FROM {{schema}}.`{{prefix}}inbox_messages` i
    FORCE INDEX (`{{prefix}}inbox_messages_claim_idx`)
WHERE i.consumer_name = $1
  AND i.status = 'pending'
  AND i.available_at <= coalesce($6, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000))
  AND (NOT $7 OR i.aggregate_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM {{schema}}.`{{prefix}}inbox_messages` e
      WHERE e.consumer_name = i.consumer_name
        AND e.aggregate_id = i.aggregate_id
        AND e.id < i.id
        AND e.status <> 'done'
        AND (e.status <> 'dead' OR $8)
  ))
ORDER BY i.available_at, i.id
LIMIT $4
FOR UPDATE SKIP LOCKED
