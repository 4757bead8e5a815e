-- outbox_browse: outbox rows for an operator's console, newest first, filtered, without their
-- payloads (their size only).
-- $1 status, $2 destination, $3 ordering_key, $4 created from (ms), $5 bytes the payload
-- contains (each NULL: any), $6 limit, $7 window: only the newest this many ids are searched,
-- $8 a JSON path (a JSON array of keys; NULL: any) whose value, as text, is $9
--
-- The window is a range on the key, as rows_list's is: the primary key is walked backwards
-- from the newest id and never past max(id) - $7, so a filter that matches nothing reads at
-- most $7 rows however many sent rows the table keeps, in a generic plan too. A message id is
-- looked up by outbox_load instead (a unique key).
SELECT id, message_id, destination, ordering_key, message_type, correlation_id,
       headers::text, octet_length(payload)::bigint, status, attempts,
       (extract(epoch FROM created_at) * 1000)::bigint,
       (extract(epoch FROM available_at) * 1000)::bigint,
       (extract(epoch FROM sent_at) * 1000)::bigint,
       left(last_error, 200), claimed_by, caused_by_consumer, caused_by_message_id,
       ''::bytea
FROM {{schema}}."{{prefix}}outbox_messages"
WHERE ($1::text IS NULL OR status = $1)
  AND ($2::text IS NULL OR destination = $2)
  AND ($3::text IS NULL OR ordering_key = $3)
  AND ($4::bigint IS NULL OR created_at >= to_timestamp($4::float8 / 1000))
  AND ($5::bytea IS NULL OR position($5::bytea IN payload) > 0)
  AND id > (SELECT coalesce(max(id), 0) FROM {{schema}}."{{prefix}}outbox_messages") - $7
  AND ($8::text IS NULL
       OR {{schema}}."{{prefix}}payload_json"(payload)
          #>> ARRAY(SELECT jsonb_array_elements_text($8::jsonb)) = $9)
ORDER BY id DESC
LIMIT $6
