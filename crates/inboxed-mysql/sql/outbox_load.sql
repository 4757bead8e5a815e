-- outbox_load: one row in full, by row id or message id, for the operator.
-- $1 row id (or NULL), $2 message_id (or NULL); one of them is given
--
-- The first condition is what an index answers (see the PostgreSQL version); the two after
-- it only narrow.
SELECT id, CONVERT(message_id USING utf8mb4) AS message_id, destination,
       CONVERT(ordering_key USING utf8mb4) AS ordering_key, message_type, correlation_id,
       headers, LENGTH(payload) AS payload_bytes, status, attempts, created_at, available_at,
       sent_at, last_error, claimed_by,
       CONVERT(caused_by_consumer USING utf8mb4) AS caused_by_consumer,
       CONVERT(caused_by_message_id USING utf8mb4) AS caused_by_message_id, payload
FROM {{schema}}.`{{prefix}}outbox_messages`
WHERE (id = $1 OR message_id = $2)
  AND ($1 IS NULL OR id = $1)
  AND ($2 IS NULL OR message_id = $2)
LIMIT 1
