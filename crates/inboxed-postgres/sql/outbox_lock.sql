-- outbox_lock: the lock-held claim. Locks up to $1 unsent rows in insert order, in the relay's
-- transaction, and keeps them locked through the publish and the marking statement: the row
-- lock is the lease. Nothing is written to the rows here, so a batch costs the rows one new
-- version (or none, when sent rows are deleted) and one commit, against two of each for a
-- lease; a relay that dies lets go of its rows as its connection closes.
-- $1 limit, $2 now (ms since the epoch; NULL: the database clock), $3 the batch's lock key
--
-- The ordering-key rule and SKIP LOCKED are outbox_claim's: an earlier row of the key that
-- another relay holds is still 'pending', so it blocks. The transaction-level advisory lock
-- on $3 is taken with the rows (a row cannot be returned without the one-row `held` joined to
-- it) and marks the batch live until its transaction ends: the reaper
-- (outbox_reap_unmarked) judges a batch's record by it. attempts counts this claim, which is
-- written only when the row is marked; group_limit is the relay's to apply.
WITH held AS (
    SELECT pg_advisory_xact_lock($3::bigint) AS locked
)
SELECT o.id, o.message_id, o.destination, o.ordering_key, o.message_type, o.correlation_id,
       o.headers::text, o.payload, o.attempts + 1, o.caused_by_consumer, o.caused_by_message_id,
       o.group_limit
FROM {{schema}}."{{prefix}}outbox_messages" o
CROSS JOIN held
WHERE o.status = 'pending'
  AND o.available_at <= coalesce(to_timestamp($2::float8 / 1000), now())
  AND (o.ordering_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM {{schema}}."{{prefix}}outbox_messages" e
      WHERE e.ordering_key = o.ordering_key
        AND e.id < o.id
        AND e.status <> 'sent'
  ))
ORDER BY o.id
LIMIT $1
FOR UPDATE OF o SKIP LOCKED
