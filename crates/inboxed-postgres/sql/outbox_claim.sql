-- outbox_claim: claims up to $3 unsent rows for a relay under a lease, in insert order.
-- $1 relay id (claimed_by), $2 claim token, $3 limit, $4 lease (ms),
-- $5 now (ms since the epoch; NULL: the database clock)
--
-- FOR UPDATE SKIP LOCKED lets concurrent relays claim disjoint rows without queueing behind
-- each other. Never a high-water mark on the id: transactions commit out of id order, and a
-- reader that remembers the highest id it saw skips the rows that commit late. A row with an
-- ordering key is eligible only when no earlier row of its key is unsent (pending, sending,
-- or dead: a dead row parks its key until an operator acts), so one key's rows are published
-- one at a time, in insert order. An earlier row that another relay is claiming right now
-- still looks pending here, so it blocks: the check errs on the side of order. Attempts are
-- counted at the claim, so a row whose publish kills its relay still reaches its limit.
-- group_limit (see outbox_release_stale) is the relay's to apply: it hands back the rows past it.
WITH candidates AS (
    SELECT o.id
    FROM {{schema}}."{{prefix}}outbox_messages" o
    WHERE o.status = 'pending'
      AND o.available_at <= coalesce(to_timestamp($5::float8 / 1000), now())
      AND (o.ordering_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM {{schema}}."{{prefix}}outbox_messages" e
          WHERE e.ordering_key = o.ordering_key
            AND e.id < o.id
            AND e.status <> 'sent'
      ))
    ORDER BY o.id
    LIMIT $3
    FOR UPDATE OF o SKIP LOCKED
)
UPDATE {{schema}}."{{prefix}}outbox_messages" m
SET status = 'sending',
    attempts = m.attempts + 1,
    claimed_by = $1,
    claim_token = $2,
    lease_expires_at = coalesce(to_timestamp($5::float8 / 1000), now()) + $4 * interval '1 millisecond'
WHERE m.id = ANY(ARRAY(SELECT id FROM candidates))
RETURNING m.id, m.message_id, m.destination, m.ordering_key, m.message_type, m.correlation_id,
          m.headers::text, m.payload, m.attempts, m.caused_by_consumer, m.caused_by_message_id,
          m.group_limit
