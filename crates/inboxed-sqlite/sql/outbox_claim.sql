-- outbox_claim: claims up to ?3 unsent rows for a relay under a lease, in insert order.
-- ?1 relay id (claimed_by), ?2 claim token, ?3 limit, ?4 lease (ms),
-- ?5 now (ms; NULL: the clock of this process)
--
-- Runs alone: a writing statement takes SQLite's one write lock as it starts, so claims
-- cannot interleave. The ordering-key rule is PostgreSQL's (see its outbox_claim.sql).
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = 'sending',
    attempts = attempts + 1,
    claimed_by = ?1,
    claim_token = ?2,
    lease_expires_at = coalesce(?5, CAST(unixepoch('subsec') * 1000 AS INTEGER)) + ?4
WHERE id IN (
    SELECT o.id
    FROM {{schema}}."{{prefix}}outbox_messages" o
    WHERE o.status = 'pending'
      AND o.available_at <= coalesce(?5, CAST(unixepoch('subsec') * 1000 AS INTEGER))
      AND (o.ordering_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM {{schema}}."{{prefix}}outbox_messages" e
          WHERE e.ordering_key = o.ordering_key
            AND e.id < o.id
            AND e.status <> 'sent'
      ))
    ORDER BY o.id
    LIMIT ?3
)
RETURNING id, message_id, destination, ordering_key, message_type, correlation_id, headers,
          payload, attempts, caused_by_consumer, caused_by_message_id, group_limit
