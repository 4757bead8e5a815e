-- outbox_load: one row, payload included, by its row id or the id it is published under.
-- $1 id (NULL: by message id), $2 message_id (NULL: by row id)
--
-- The first condition is what an index answers: the primary key or the message id's unique
-- key, one lookup each (an index OR). The two after it only narrow; written alone, as
-- "NULL or equal", they leave no index to use in a generic plan, which then reads the whole
-- table for a message id (scripts/console-plans.sh catches that).
SELECT id, message_id, destination, ordering_key, message_type, correlation_id,
       headers::text, octet_length(payload)::bigint, status, attempts,
       (extract(epoch FROM created_at) * 1000)::bigint,
       (extract(epoch FROM available_at) * 1000)::bigint,
       (extract(epoch FROM sent_at) * 1000)::bigint,
       last_error, claimed_by, caused_by_consumer, caused_by_message_id,
       payload
FROM {{schema}}."{{prefix}}outbox_messages"
WHERE (id = $1 OR message_id = $2)
  AND ($1::bigint IS NULL OR id = $1)
  AND ($2::text IS NULL OR message_id = $2)
LIMIT 1
