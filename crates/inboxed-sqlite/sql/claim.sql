-- claim: records (consumer_name, message_id) inside the handler's transaction unless the key
-- was processed already or sits on the dead-letter path.
-- ?1 consumer_name, ?2 message_id, ?3 message_type, ?4 correlation_id, ?5 payload_hash
--
-- The transaction began with BEGIN IMMEDIATE, so this connection holds the single write lock:
-- a concurrent duplicate is still waiting at its own BEGIN and will see our committed row.
-- The WHERE clause is required by SQLite's grammar before ON CONFLICT in INSERT … SELECT.
-- RETURNING yields a row only when the insert happened.
INSERT INTO {{schema}}."{{prefix}}processed_messages"
    (consumer_name, message_id, message_type, correlation_id, payload_hash)
SELECT ?1, ?2, ?3, ?4, ?5
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}dead_letters" d
    WHERE d.consumer_name = ?1 AND d.message_id = ?2 AND d.reason <> 'conflict'
)
ON CONFLICT (consumer_name, message_id) DO NOTHING
RETURNING 1
