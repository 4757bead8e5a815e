-- load_dead_letter_by_id: one dead letter in full, payload included, for `dead-letters show`
-- and `retry`. $1 id
SELECT id, consumer_name, message_id, message_type, correlation_id, payload, reason, error,
       attempts::bigint AS attempts,
       (extract(epoch FROM first_failed_at) * 1000)::bigint AS first_failed_ms,
       (extract(epoch FROM last_failed_at) * 1000)::bigint AS last_failed_ms
FROM {{schema}}."{{prefix}}dead_letters"
WHERE id = $1
