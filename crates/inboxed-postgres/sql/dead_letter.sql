-- dead_letter: writes the dead letter of a key unless the key was processed or already has
-- one. Never overwrites: the first record keeps its reason and error.
-- $1 consumer_name, $2 message_id (NULL: no usable key), $3 message_type, $4 correlation_id,
-- $5 payload, $6 payload_hash, $7 reason, $8 error, $9 attempts, $10 conflict_hash (empty
-- unless reason = 'conflict'), $11 message_key (the id's stored form, see migration 1; NULL
-- with the id)
--
-- The NOT EXISTS guard keeps "processed" and "dead" apart: a redelivery of a message that was
-- committed but not acked may exceed max_attempts, and must settle as a duplicate, not be
-- reported dead. Conflict dead letters are the exception: their key is processed by definition,
-- and conflict_hash gives each colliding payload its own row. Zero rows affected means the key
-- was processed or already dead-lettered (the store looks up which).
INSERT INTO {{schema}}."{{prefix}}dead_letters"
    (consumer_name, message_id, message_type, correlation_id, payload, payload_hash,
     reason, error, attempts, conflict_hash)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10
WHERE $7 = 'conflict' OR $2::text IS NULL OR NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}{{processed}}" p
    WHERE p.consumer_id = (SELECT id FROM {{schema}}."{{prefix}}consumers" WHERE name = $1)
      AND p.message_key = $11
)
ON CONFLICT (consumer_name, message_id, conflict_hash) DO NOTHING
