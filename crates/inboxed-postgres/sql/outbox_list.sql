-- outbox_list: the rows an operator's filter selects, oldest first, without their payloads
-- (their size only: a list of large messages must stay small).
-- $1 ids (bigint[]; NULL: any), $2 message_id (NULL: any), $3 status (NULL: any),
-- $4 destination (NULL: any), $5 ordering_key (NULL: any), $6 limit
--
-- A status narrows the read to its partial index (pending, sending, dead, sent by time):
-- a list of dead rows never scans the sent ones, which are the bulk of the table.
SELECT id, message_id, destination, ordering_key, message_type, correlation_id,
       headers::text, octet_length(payload)::bigint, status, attempts,
       (extract(epoch FROM created_at) * 1000)::bigint,
       (extract(epoch FROM available_at) * 1000)::bigint,
       (extract(epoch FROM sent_at) * 1000)::bigint,
       last_error, claimed_by, caused_by_consumer, caused_by_message_id,
       ''::bytea
FROM {{schema}}."{{prefix}}outbox_messages"
WHERE ($1::bigint[] IS NULL OR id = ANY($1))
  AND ($2::text IS NULL OR message_id = $2)
  AND ($3::text IS NULL OR status = $3)
  AND ($4::text IS NULL OR destination = $4)
  AND ($5::text IS NULL OR ordering_key = $5)
ORDER BY id
LIMIT $6
