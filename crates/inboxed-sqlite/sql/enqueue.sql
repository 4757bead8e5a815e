-- enqueue: the store-then-process receipt (see the PostgreSQL version).
-- ?1 consumer_name, ?2 message_id, ?3 aggregate_id, ?4 message_type, ?5 correlation_id,
-- ?6 payload, ?7 payload_hash, ?8 headers (migration 18's stored form; NULL: none)
INSERT INTO {{schema}}."{{prefix}}inbox_messages"
    (consumer_name, message_id, aggregate_id, message_type, correlation_id, payload, payload_hash,
     headers)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (consumer_name, message_id) DO NOTHING
RETURNING id
