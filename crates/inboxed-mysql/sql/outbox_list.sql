-- outbox_list: the rows a filter selects, oldest first, without payloads, for the operator.
-- $1 row ids (a JSON array, or NULL), $2 message_id, $3 status, $4 destination,
-- $5 ordering_key (each NULL: any), $6 limit
--
-- Keys are read back as text; the payload's place holds an empty value (only its size is
-- listed).
SELECT id, CONVERT(message_id USING utf8mb4) AS message_id, destination,
       CONVERT(ordering_key USING utf8mb4) AS ordering_key, message_type, correlation_id,
       headers, LENGTH(payload) AS payload_bytes, status, attempts, created_at, available_at,
       sent_at, last_error, claimed_by,
       CONVERT(caused_by_consumer USING utf8mb4) AS caused_by_consumer,
       CONVERT(caused_by_message_id USING utf8mb4) AS caused_by_message_id, X'' AS payload
FROM {{schema}}.`{{prefix}}outbox_messages`
WHERE ($1 IS NULL OR JSON_CONTAINS($1, CAST(id AS CHAR)))
  AND ($2 IS NULL OR message_id = $2)
  AND ($3 IS NULL OR status = $3)
  AND ($4 IS NULL OR destination = $4)
  AND ($5 IS NULL OR ordering_key = $5)
ORDER BY id
LIMIT $6
