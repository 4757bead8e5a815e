-- load_dead_letter_by_id: one dead letter in full, payload included, for `dead-letters show`
-- and `retry`. ?1 id
SELECT id, consumer_name, message_id, message_type, correlation_id, payload, reason, error,
       attempts,
       CAST(round((julianday(first_failed_at) - 2440587.5) * 86400000) AS INTEGER) AS first_failed_ms,
       CAST(round((julianday(last_failed_at) - 2440587.5) * 86400000) AS INTEGER) AS last_failed_ms
FROM {{schema}}."{{prefix}}dead_letters"
WHERE id = ?1
