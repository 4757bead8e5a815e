-- row_load: one store-then-process row in full, payload included, for the console's page of
-- it. $1 id
SELECT id, consumer_name, message_id, aggregate_id, message_type, status,
       attempts::bigint AS attempts,
       (extract(epoch FROM received_at) * 1000)::bigint AS received_ms,
       (extract(epoch FROM available_at) * 1000)::bigint AS available_ms,
       (extract(epoch FROM lease_expires_at) * 1000)::bigint AS lease_ms,
       claimed_by, last_error,
       (extract(epoch FROM done_at) * 1000)::bigint AS done_ms,
       octet_length(payload)::bigint AS payload_bytes,
       correlation_id, payload
FROM {{schema}}."{{prefix}}inbox_messages"
WHERE id = $1
