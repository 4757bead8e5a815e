-- rows_list: store-then-process rows for an operator, newest first, filtered, without their
-- payloads (only their size).
-- $1 consumer_name, $2 status, $3 aggregate_id, $4 message_id, $5 received from (ms),
-- $6 received before (ms), $7 bytes the payload contains (each NULL: any), $8 limit,
-- $9 window: only the newest this many ids are searched, $10 a JSON path (a JSON array of
-- keys; NULL: any) whose value, as text, is $11
--
-- The window keeps a search bounded however large the table grows: the primary key is walked
-- backwards from the newest id and never past max(id) - $9, so a filter that matches nothing
-- reads at most $9 rows instead of the whole table (the page says when it searched a window).
-- The window is a range on the key, never one side of an OR, so that it bounds the scan in a
-- generic plan too. A consumer's message id is looked up by rows_by_key instead.
SELECT id, consumer_name, message_id, aggregate_id, message_type, status,
       attempts::bigint AS attempts,
       (extract(epoch FROM received_at) * 1000)::bigint AS received_ms,
       (extract(epoch FROM available_at) * 1000)::bigint AS available_ms,
       (extract(epoch FROM lease_expires_at) * 1000)::bigint AS lease_ms,
       claimed_by, left(last_error, 200) AS last_error,
       (extract(epoch FROM done_at) * 1000)::bigint AS done_ms,
       octet_length(payload)::bigint AS payload_bytes
FROM {{schema}}."{{prefix}}inbox_messages"
WHERE ($1::text IS NULL OR consumer_name = $1)
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR aggregate_id = $3)
  AND ($4::text IS NULL OR message_id = $4)
  AND ($5::bigint IS NULL OR received_at >= to_timestamp($5::float8 / 1000))
  AND ($6::bigint IS NULL OR received_at < to_timestamp($6::float8 / 1000))
  AND ($7::bytea IS NULL OR position($7::bytea IN payload) > 0)
  AND id > (SELECT coalesce(max(id), 0) FROM {{schema}}."{{prefix}}inbox_messages") - $9
  AND ($10::text IS NULL
       OR {{schema}}."{{prefix}}payload_json"(payload)
          #>> ARRAY(SELECT jsonb_array_elements_text($10::jsonb)) = $11)
ORDER BY id DESC
LIMIT $8
