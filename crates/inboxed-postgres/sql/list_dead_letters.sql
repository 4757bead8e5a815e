-- list_dead_letters: dead letters for an operator, newest failure first, filtered.
-- $1 consumer_name (NULL: any), $2 reason (NULL: any), $3 failed since (ms since the epoch;
-- NULL: any time), $4 text the error contains, case-insensitively (NULL: any), $5 limit,
-- $6 message type (NULL: any), $7 message id (NULL: any), $8 window: only the newest this
-- many ids are searched (the largest bigint: all),
-- $9 bytes the payload contains (NULL: any), $10 a JSON path (a JSON array of keys; NULL:
-- any) whose value, as text, is $11 (a payload that is not JSON never matches)
--
-- The window keeps a search bounded however large the table grows: a range on the primary key
-- below the newest id, so that a filter matching nothing reads at most $8 rows before the
-- sort (the console passes 100,000; `inboxed dead-letters list` searches all).
--
-- The payload itself is left out (only its size): a listing must stay small however large
-- the messages are; `load_dead_letter_by_id` returns it.
SELECT id, consumer_name, message_id, message_type, reason, attempts::bigint AS attempts,
       (extract(epoch FROM last_failed_at) * 1000)::bigint AS last_failed_ms,
       octet_length(payload)::bigint AS payload_bytes,
       left(error, 200) AS error
FROM {{schema}}."{{prefix}}dead_letters"
WHERE ($1::text IS NULL OR consumer_name = $1)
  AND ($2::text IS NULL OR reason = $2)
  AND ($3::bigint IS NULL OR last_failed_at >= to_timestamp($3::float8 / 1000))
  AND ($4::text IS NULL OR strpos(lower(error), lower($4)) > 0)
  AND ($6::text IS NULL OR message_type = $6)
  AND ($7::text IS NULL OR message_id = $7)
  AND ($9::bytea IS NULL OR position($9::bytea IN payload) > 0)
  AND ($10::text IS NULL
       OR {{schema}}."{{prefix}}payload_json"(payload)
          #>> ARRAY(SELECT jsonb_array_elements_text($10::jsonb)) = $11)
  AND id > (SELECT coalesce(max(id), 0) FROM {{schema}}."{{prefix}}dead_letters") - $8
ORDER BY last_failed_at DESC, id DESC
LIMIT $5
