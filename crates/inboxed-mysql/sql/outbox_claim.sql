-- outbox_claim: the first of a claim's two statements, in a transaction of its own: selects
-- and locks up to $3 unsent rows in insert order and returns them as claimed (their attempt
-- counted); outbox_claim_stamp.sql then marks them claimed.
-- $1 relay id (claimed_by), $2 claim token, $3 limit, $4 lease (ms), $5 now (ms; NULL: the
-- server's clock) ($1, $2 and $4 are the stamp's)
--
-- FOR UPDATE SKIP LOCKED: concurrent relays claim disjoint rows. A plain SELECT, so that the
-- ordering-key check of earlier rows reads without locks (claim_batch.sql says why: in an
-- UPDATE, InnoDB locks every row a subquery reads). The ordering-key rule is PostgreSQL's
-- (its outbox_claim.sql): a row with a key goes only when no earlier row of its key is unsent,
-- and an earlier row another relay is claiming right now still reads as pending, so it blocks.
-- Through the claim index, in its order, so that the locking read stops at the limit.
SELECT o.id, CONVERT(o.message_id USING utf8mb4) AS message_id, o.destination,
       CONVERT(o.ordering_key USING utf8mb4) AS ordering_key, o.message_type, o.correlation_id,
       o.headers, o.payload, o.attempts + 1 AS attempts,
       CONVERT(o.caused_by_consumer USING utf8mb4) AS caused_by_consumer,
       CONVERT(o.caused_by_message_id USING utf8mb4) AS caused_by_message_id, o.group_limit
FROM {{schema}}.`{{prefix}}outbox_messages` o
    FORCE INDEX (`{{prefix}}outbox_messages_claim_idx`)
WHERE o.status = 'pending'
  AND o.available_at <= coalesce($5, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000))
  AND (o.ordering_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM {{schema}}.`{{prefix}}outbox_messages` e
      WHERE e.ordering_key = o.ordering_key
        AND e.id < o.id
        AND e.status <> 'sent'
  ))
ORDER BY o.status, o.id
LIMIT $3
FOR UPDATE SKIP LOCKED
