-- row_load: one store-then-process row in full, payload included, for the console's page of
-- it. $1 id
SELECT id, CONVERT(consumer_name USING utf8mb4) AS consumer_name,
       CONVERT(message_id USING utf8mb4) AS message_id,
       CONVERT(aggregate_id USING utf8mb4) AS aggregate_id, message_type,
       CONVERT(status USING utf8mb4) AS status, CAST(attempts AS SIGNED) AS attempts,
       received_at AS received_ms, available_at AS available_ms,
       lease_expires_at AS lease_ms, claimed_by, last_error,
       done_at AS done_ms, CAST(LENGTH(payload) AS SIGNED) AS payload_bytes,
       correlation_id, payload
FROM {{schema}}.`{{prefix}}inbox_messages`
WHERE id = $1
