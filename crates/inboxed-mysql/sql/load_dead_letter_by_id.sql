-- load_dead_letter_by_id: one dead letter in full, payload included, for `dead-letters show`
-- and `retry`. $1 id
SELECT id, CONVERT(consumer_name USING utf8mb4) AS consumer_name,
       CONVERT(message_id USING utf8mb4) AS message_id, message_type, correlation_id, payload,
       reason, error, attempts,
       CAST(FLOOR(UNIX_TIMESTAMP(first_failed_at) * 1000) AS SIGNED) AS first_failed_ms,
       CAST(FLOOR(UNIX_TIMESTAMP(last_failed_at) * 1000) AS SIGNED) AS last_failed_ms
FROM {{schema}}.`{{prefix}}dead_letters`
WHERE id = $1
