-- claim_batch: claims up to ?4 pending rows of a consumer, oldest first, under a lease.
-- ?1 consumer_name, ?2 worker id, ?3 claim token, ?4 limit, ?5 lease (ms),
-- ?6 now (ms; NULL: the clock of this process), ?7 ordered, ?8 park
--
-- Runs alone: a writing statement takes SQLite's one write lock as it starts (waiting up to
-- the busy timeout), so claims cannot interleave and no row lock is needed. The ordered-mode rule and `group_limit`
-- are the PostgreSQL ones.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'processing',
    attempts = attempts + 1,
    claimed_at = coalesce(?6, CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    claimed_by = ?2,
    lease_expires_at = coalesce(?6, CAST(unixepoch('subsec') * 1000 AS INTEGER)) + ?5,
    claim_token = ?3
WHERE id IN (
    SELECT i.id
    FROM {{schema}}."{{prefix}}inbox_messages" i
    WHERE i.consumer_name = ?1
      AND i.status = 'pending'
      AND i.available_at <= coalesce(?6, CAST(unixepoch('subsec') * 1000 AS INTEGER))
      AND (NOT ?7 OR i.aggregate_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM {{schema}}."{{prefix}}inbox_messages" e
          WHERE e.consumer_name = i.consumer_name
            AND e.aggregate_id = i.aggregate_id
            AND e.id < i.id
            AND e.status <> 'done'
            AND (e.status <> 'dead' OR ?8)
      ))
    ORDER BY i.available_at, i.id
    LIMIT ?4
)
RETURNING id, message_id, aggregate_id, message_type, correlation_id, payload, attempts,
          group_limit, headers
