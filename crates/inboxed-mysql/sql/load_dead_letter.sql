-- load_dead_letter: the dead letter of a key, for an operator's retry. Conflict records are
-- not returned: their key is processed, and retrying one would only be a duplicate.
-- $1 consumer_name, $2 message_id
SELECT message_type, correlation_id, payload, reason, error, attempts, payload_hash
FROM {{schema}}.`{{prefix}}dead_letters`
WHERE consumer_name = $1 AND message_id = $2 AND reason <> 'conflict'
