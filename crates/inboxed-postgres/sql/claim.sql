-- claim: records (consumer_name, message_id) inside the handler's transaction unless the key
-- was processed already or sits on the dead-letter path.
-- $1 consumer_name, $2 message_id, $3 message_type, $4 correlation_id, $5 payload_hash
--
-- Insert first, never SELECT first: a concurrent duplicate's INSERT waits on our uncommitted
-- row and then sees the conflict, so only one transaction can commit the key. One row affected
-- means "new"; zero means "look up why" (lookup.sql). Conflict dead letters are excluded from
-- the guard because their key is processed anyway.
INSERT INTO {{schema}}."{{prefix}}processed_messages"
    (consumer_name, message_id, message_type, correlation_id, payload_hash)
SELECT $1, $2, $3, $4, $5
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}dead_letters" d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
)
ON CONFLICT (consumer_name, message_id) DO NOTHING
