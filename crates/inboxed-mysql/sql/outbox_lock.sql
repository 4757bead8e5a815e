-- outbox_lock: the lock-held claim. Locks up to $1 unsent rows in insert order, in the relay's
-- transaction, and keeps them locked through the publish and the marking statement: the row
-- lock is the lease. Nothing is written to the rows here; a relay that dies lets go of its rows
-- as its connection closes.
-- $1 limit, $2 now (ms since the epoch; NULL: the server's clock), $3 the batch's lock key
--
-- First the batch's named lock, taken on this connection before any row (0: no wait; the key
-- is random): it marks the batch live until the connection goes back to the pool, whose reset
-- releases every named lock (MySqlStore::pool_options), or closes. outbox_hold.sql records
-- the same name, and the reaper (outbox_reap_unmarked.sql) judges a record only once it is
-- free. Named locks are the server's, shared by every database: the name is a hash of the
-- table's namespace and the key, at most 64 characters as MySQL wants.
DO GET_LOCK(CONCAT('inboxed/', SHA1(CONCAT('{{schema}}.{{prefix}}outbox_unmarked/', $3))), 0);
-- Then the rows, as outbox_claim.sql selects and locks them (it says why a plain SELECT, and
-- why through the claim index), and only if this connection holds the batch's lock: a batch
-- that could not take it (the name still held by another connection) claims nothing rather
-- than run unmarked, its record judged as a dead batch's while it publishes. attempts counts
-- this claim, written only when the row is marked; group_limit is the relay's to apply.
--! rows
SELECT o.id, CONVERT(o.message_id USING utf8mb4) AS message_id, o.destination,
       CONVERT(o.ordering_key USING utf8mb4) AS ordering_key, o.message_type, o.correlation_id,
       o.headers, o.payload, o.attempts + 1 AS attempts,
       CONVERT(o.caused_by_consumer USING utf8mb4) AS caused_by_consumer,
       CONVERT(o.caused_by_message_id USING utf8mb4) AS caused_by_message_id, o.group_limit
FROM {{schema}}.`{{prefix}}outbox_messages` o
    FORCE INDEX (`{{prefix}}outbox_messages_claim_idx`)
WHERE o.status = 'pending'
  AND IS_USED_LOCK(CONCAT('inboxed/', SHA1(CONCAT('{{schema}}.{{prefix}}outbox_unmarked/', $3))))
      = CONNECTION_ID()
  AND o.available_at <= coalesce($2, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000))
  AND (o.ordering_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM {{schema}}.`{{prefix}}outbox_messages` e
      WHERE e.ordering_key = o.ordering_key
        AND e.id < o.id
        AND e.status <> 'sent'
  ))
ORDER BY o.status, o.id
LIMIT $1
FOR UPDATE SKIP LOCKED
