-- rows_by_key: rows_list for a consumer's message id, a unique key: looked up through it,
-- wherever the row is (no window), under a generic plan too (plain equalities, not the list's
-- optional ones).
-- $1 consumer_name, $2 status, $3 aggregate_id, $4 message_id, $5 received from (ms),
-- $6 received before (ms), $7 bytes the payload contains (each but $1 and $4 NULL: any),
-- $8 limit, $9 a JSON path (a JSON array of keys; NULL: any) whose value, as text, is
-- $10
SELECT id, consumer_name, message_id, aggregate_id, message_type, status,
       attempts::bigint AS attempts,
       (extract(epoch FROM received_at) * 1000)::bigint AS received_ms,
       (extract(epoch FROM available_at) * 1000)::bigint AS available_ms,
       (extract(epoch FROM lease_expires_at) * 1000)::bigint AS lease_ms,
       claimed_by, left(last_error, 200) AS last_error,
       (extract(epoch FROM done_at) * 1000)::bigint AS done_ms,
       octet_length(payload)::bigint AS payload_bytes
FROM {{schema}}."{{prefix}}inbox_messages"
WHERE consumer_name = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR aggregate_id = $3)
  AND message_id = $4
  AND ($5::bigint IS NULL OR received_at >= to_timestamp($5::float8 / 1000))
  AND ($6::bigint IS NULL OR received_at < to_timestamp($6::float8 / 1000))
  AND ($7::bytea IS NULL OR position($7::bytea IN payload) > 0)
  AND ($9::text IS NULL
       OR {{schema}}."{{prefix}}payload_json"(payload)
          #>> ARRAY(SELECT jsonb_array_elements_text($9::jsonb)) = $10)
ORDER BY id DESC
LIMIT $8
