-- list_dead_letters: dead letters for an operator, newest failure first, filtered.
-- $1 consumer_name (NULL: any), $2 reason (NULL: any), $3 failed since (ms since the epoch;
-- NULL: any time), $4 text the error contains, case-insensitively (NULL: any), $5 limit,
-- $6 message type (NULL: any), $7 message id (NULL: any), $8 window: only the newest this
-- many ids are searched (the largest bigint: all; see the PostgreSQL version),
-- $9 bytes the payload contains (NULL: any), $10 a JSON path (a JSON array of keys; NULL:
-- any) whose value, as text, is $11 (a payload that is not JSON never matches)
--
-- The payload itself is left out (only its size); load_dead_letter_by_id returns it. The error
-- column compares in a binary collation: the search lowers both sides.
SELECT id, CONVERT(consumer_name USING utf8mb4) AS consumer_name,
       CONVERT(message_id USING utf8mb4) AS message_id, message_type, reason, attempts,
       CAST(FLOOR(UNIX_TIMESTAMP(last_failed_at) * 1000) AS SIGNED) AS last_failed_ms,
       CAST(LENGTH(payload) AS SIGNED) AS payload_bytes,
       SUBSTRING(error, 1, 200) AS error
FROM {{schema}}.`{{prefix}}dead_letters`
WHERE ($1 IS NULL OR consumer_name = $1)
  AND ($2 IS NULL OR reason = $2)
  AND ($3 IS NULL OR last_failed_at >= FROM_UNIXTIME($3 / 1000))
  AND ($4 IS NULL OR LOCATE(LOWER(CONVERT($4 USING utf8mb4)), LOWER(CONVERT(error USING utf8mb4))) > 0)
  AND ($6 IS NULL OR message_type = $6)
  AND ($7 IS NULL OR message_id = $7)
  AND ($9 IS NULL OR LOCATE($9, payload) > 0)
  AND ($10 IS NULL
       OR (JSON_VALID(CONVERT(payload USING utf8mb4))
           AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(payload USING utf8mb4), CONCAT('$',
                 (SELECT GROUP_CONCAT(CONCAT('."', j.k, '"') ORDER BY j.n SEPARATOR '')
                  FROM JSON_TABLE($10, '$[*]' COLUMNS (n FOR ORDINALITY,
                                                       k VARCHAR(255) PATH '$')) AS j))))
               = $11))
  AND id > (SELECT COALESCE(MAX(id), 0) FROM {{schema}}.`{{prefix}}dead_letters`) - $8
ORDER BY last_failed_at DESC, id DESC
LIMIT $5
