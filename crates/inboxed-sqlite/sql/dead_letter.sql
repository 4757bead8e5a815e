-- dead_letter: writes (or refreshes) the dead letter of a key, unless the key was processed.
-- ?1 consumer_name, ?2 message_id (NULL: no usable key), ?3 message_type, ?4 correlation_id,
-- ?5 payload, ?6 payload_hash, ?7 reason, ?8 error, ?9 attempts
--
-- The guard keeps "processed" and "dead" exclusive (see the PostgreSQL version); conflict dead
-- letters are the exception. RETURNING yields no row when the key was processed.
INSERT INTO {{schema}}."{{prefix}}dead_letters"
    (consumer_name, message_id, message_type, correlation_id, payload, payload_hash,
     reason, error, attempts)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9
WHERE ?7 = 'conflict' OR ?2 IS NULL OR NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}processed_messages" p
    WHERE p.consumer_name = ?1 AND p.message_id = ?2
)
ON CONFLICT (consumer_name, message_id) DO UPDATE SET
    reason = excluded.reason,
    error = excluded.error,
    attempts = excluded.attempts,
    payload = excluded.payload,
    payload_hash = excluded.payload_hash,
    last_failed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
RETURNING 1
