-- letters_select: locks the dead letters an operator's retry or discard would touch, oldest
-- first, with what decides whether each can be retried (no payload: a dry run over thousands
-- of letters stays small).
-- $1 ids (a JSON array; NULL: any), $2 consumer_name, $3 reason, $4 failed since (ms since the
-- epoch), $5 text the error contains (case-insensitively), $6 message type (each NULL: any),
-- $7 limit, $8 message id (NULL: any),
-- $9 bytes the payload contains (NULL: any), $10 a JSON path (a JSON array of keys;
-- NULL: any) whose value, as text, is $11
--
-- The same filters as list_dead_letters, so that "all that match" acts on what the operator
-- saw listed; locked until the change and its audit record commit.
SELECT id, CONVERT(consumer_name USING utf8mb4) AS consumer_name,
       CONVERT(message_id USING utf8mb4) AS message_id, reason,
       CAST(LENGTH(payload) AS SIGNED) AS payload_bytes
FROM {{schema}}.`{{prefix}}dead_letters`
WHERE ($1 IS NULL OR JSON_CONTAINS($1, CAST(id AS CHAR)))
  AND ($2 IS NULL OR consumer_name = $2)
  AND ($3 IS NULL OR reason = $3)
  AND ($4 IS NULL OR last_failed_at >= FROM_UNIXTIME($4 / 1000))
  AND ($5 IS NULL OR LOCATE(LOWER(CONVERT($5 USING utf8mb4)), LOWER(CONVERT(error USING utf8mb4))) > 0)
  AND ($6 IS NULL OR message_type = $6)
  AND ($8 IS NULL OR message_id = $8)
  AND ($9 IS NULL OR LOCATE($9, payload) > 0)
  AND ($10 IS NULL
       OR (JSON_VALID(CONVERT(payload USING utf8mb4))
           AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(payload USING utf8mb4), CONCAT('$',
                 (SELECT GROUP_CONCAT(CONCAT('."', j.k, '"') ORDER BY j.n SEPARATOR '')
                  FROM JSON_TABLE($10, '$[*]' COLUMNS (n FOR ORDINALITY,
                                                       k VARCHAR(255) PATH '$')) AS j))))
               = $11))
ORDER BY id
LIMIT $7
FOR UPDATE
