-- enqueue_lookup_many: the stored payload hashes of keys that enqueue_many did not insert, read
-- in its transaction (so a key first given earlier in the same batch is seen too).
-- $1 consumer_name, $2 message_id text[]
SELECT message_id, payload_hash FROM {{schema}}."{{prefix}}inbox_messages"
WHERE consumer_name = $1 AND message_id = ANY($2::text[])
