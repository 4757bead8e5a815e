-- dead_letter: writes (or refreshes) the dead letter of a key, unless the key was processed.
-- $1 consumer_name, $2 message_id (NULL: no usable key), $3 message_type, $4 correlation_id,
-- $5 payload, $6 payload_hash, $7 reason, $8 error, $9 attempts
--
-- The NOT EXISTS guard keeps "processed" and "dead" exclusive: a redelivery of a message that
-- was committed but not acked may exceed max_attempts, and must settle as a duplicate, not be
-- reported dead. Conflict dead letters are the exception: their key is processed by definition.
-- Zero rows affected means the key was processed.
INSERT INTO {{schema}}."{{prefix}}dead_letters" AS d
    (consumer_name, message_id, message_type, correlation_id, payload, payload_hash,
     reason, error, attempts)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9
WHERE $7 = 'conflict' OR $2::text IS NULL OR NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}processed_messages" p
    WHERE p.consumer_name = $1 AND p.message_id = $2
)
ON CONFLICT (consumer_name, message_id) DO UPDATE SET
    reason = EXCLUDED.reason,
    error = EXCLUDED.error,
    attempts = EXCLUDED.attempts,
    payload = EXCLUDED.payload,
    payload_hash = EXCLUDED.payload_hash,
    last_failed_at = now()
