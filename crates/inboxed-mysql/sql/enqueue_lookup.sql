-- enqueue_lookup: the stored payload hash of a key that enqueue found already present, so that
-- another payload under the same key is reported as a conflict.
-- $1 consumer_name, $2 message_id
SELECT payload_hash FROM {{schema}}.`{{prefix}}inbox_messages`
WHERE consumer_name = $1 AND message_id = $2
