-- claim: records the key inside the handler's transaction unless it was processed already or
-- sits on the dead-letter path.
-- $1 consumer_name, $2 message_id, $3 message_key (the id's stored form, see migration 1),
-- $4 payload fingerprint (first 4 bytes of its SHA-256)
--
-- Insert first, never SELECT first: a concurrent duplicate's INSERT waits on our uncommitted
-- row and then sees the conflict, so only one transaction can commit the key. One row affected
-- means "new"; zero means "look up why" (lookup.sql). Conflict dead letters are excluded from
-- the guard because their key is processed anyway. The consumer's id comes from the registry
-- (register_consumer runs before a processor's first claim); were it missing, the NULL would
-- fail the NOT NULL constraint rather than pass for a duplicate.
INSERT INTO {{schema}}."{{prefix}}processed_messages" (consumer_id, message_key, fingerprint)
SELECT (SELECT id FROM {{schema}}."{{prefix}}consumers" WHERE name = $1),
       $3, $4
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}dead_letters" d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
)
ON CONFLICT (consumer_id, message_key) DO NOTHING
