-- outbox_browse: outbox rows for an operator's console, newest first, filtered, without their
-- payloads (their size only).
-- $1 status, $2 destination, $3 ordering_key, $4 created from (ms), $5 bytes the payload
-- contains (each NULL: any), $6 limit, $7 window: only the newest this many ids are searched,
-- $8 a JSON path (a JSON array of keys; NULL: any) whose value, as text, is $9
--
-- The window keeps a search bounded however large the table grows (see the PostgreSQL
-- version); a message id is looked up by outbox_load instead. Keys are read back as text.
SELECT id, CONVERT(message_id USING utf8mb4) AS message_id, destination,
       CONVERT(ordering_key USING utf8mb4) AS ordering_key, message_type, correlation_id,
       headers, LENGTH(payload) AS payload_bytes, status, attempts, created_at, available_at,
       sent_at, SUBSTRING(last_error, 1, 200) AS last_error, claimed_by,
       CONVERT(caused_by_consumer USING utf8mb4) AS caused_by_consumer,
       CONVERT(caused_by_message_id USING utf8mb4) AS caused_by_message_id, X'' AS payload
FROM {{schema}}.`{{prefix}}outbox_messages`
WHERE ($1 IS NULL OR status = $1)
  AND ($2 IS NULL OR destination = $2)
  AND ($3 IS NULL OR ordering_key = $3)
  AND ($4 IS NULL OR created_at >= $4)
  AND ($5 IS NULL OR LOCATE($5, payload) > 0)
  AND id > (SELECT COALESCE(MAX(id), 0) FROM {{schema}}.`{{prefix}}outbox_messages`) - $7
  AND ($8 IS NULL
       OR (JSON_VALID(CONVERT(payload USING utf8mb4))
           AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(payload USING utf8mb4), CONCAT('$',
                 (SELECT GROUP_CONCAT(CONCAT('."', j.k, '"') ORDER BY j.n SEPARATOR '')
                  FROM JSON_TABLE($8, '$[*]' COLUMNS (n FOR ORDINALITY,
                                                      k VARCHAR(255) PATH '$')) AS j))))
               = $9))
ORDER BY id DESC
LIMIT $6
