-- outbox_load: one row, payload included, by its row id or the id it is published under.
-- ?1 id (NULL: by message id), ?2 message_id (NULL: by row id)
--
-- The first condition is what an index answers (see the PostgreSQL version); the two after
-- it only narrow.
SELECT id, message_id, destination, ordering_key, message_type, correlation_id,
       headers, length(payload), status, attempts, created_at, available_at, sent_at,
       last_error, claimed_by, caused_by_consumer, caused_by_message_id, payload
FROM {{schema}}."{{prefix}}outbox_messages"
WHERE (id = ?1 OR message_id = ?2)
  AND (?1 IS NULL OR id = ?1)
  AND (?2 IS NULL OR message_id = ?2)
LIMIT 1
