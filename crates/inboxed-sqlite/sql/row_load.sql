-- row_load: one store-then-process row in full, payload included, for the console's page of
-- it. ?1 id
SELECT id, consumer_name, message_id, aggregate_id, message_type, status, attempts,
       received_at AS received_ms, available_at AS available_ms, lease_expires_at AS lease_ms,
       claimed_by, last_error, done_at AS done_ms, length(payload) AS payload_bytes,
       correlation_id, payload
FROM {{schema}}."{{prefix}}inbox_messages"
WHERE id = ?1
