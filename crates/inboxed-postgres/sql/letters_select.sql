-- letters_select: locks the dead letters an operator's retry or discard would touch, oldest
-- first, with what decides whether each can be retried (no payload: it is not loaded here, so
-- a dry run over thousands of letters stays small).
-- $1 ids (bigint[]; NULL: any), $2 consumer_name, $3 reason, $4 failed since (ms since the
-- epoch), $5 text the error contains (case-insensitively), $6 message type (each NULL: any),
-- $7 limit, $8 message id (NULL: any),
-- $9 bytes the payload contains (NULL: any), $10 a JSON path (a JSON array of keys;
-- NULL: any) whose value, as text, is $11
--
-- The same filters as list_dead_letters, so that "all that match" acts on what the operator
-- saw listed. FOR UPDATE holds them against a concurrent operator (or a redrive's consumer
-- deleting its letter) until the change and its audit record commit.
SELECT id, consumer_name, message_id, reason, octet_length(payload)::bigint AS payload_bytes
FROM {{schema}}."{{prefix}}dead_letters"
WHERE ($1::bigint[] IS NULL OR id = ANY($1))
  AND ($2::text IS NULL OR consumer_name = $2)
  AND ($3::text IS NULL OR reason = $3)
  AND ($4::bigint IS NULL OR last_failed_at >= to_timestamp($4::float8 / 1000))
  AND ($5::text IS NULL OR strpos(lower(error), lower($5)) > 0)
  AND ($6::text IS NULL OR message_type = $6)
  AND ($8::text IS NULL OR message_id = $8)
  AND ($9::bytea IS NULL OR position($9::bytea IN payload) > 0)
  AND ($10::text IS NULL
       OR {{schema}}."{{prefix}}payload_json"(payload)
          #>> ARRAY(SELECT jsonb_array_elements_text($10::jsonb)) = $11)
ORDER BY id
LIMIT $7
FOR UPDATE
