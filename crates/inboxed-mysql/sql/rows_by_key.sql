-- rows_by_key: rows_list for a consumer's message id, a unique key: looked up through it,
-- wherever the row is (no window), under a generic plan too (plain equalities, not the list's
-- optional ones).
-- $1 consumer_name, $2 status, $3 aggregate_id, $4 message_id, $5 received from (ms),
-- $6 received before (ms), $7 bytes the payload contains (each but $1 and $4 NULL: any),
-- $8 limit, $9 a JSON path (a JSON array of keys; NULL: any) whose value, as text, is
-- $10
SELECT id, CONVERT(consumer_name USING utf8mb4) AS consumer_name,
       CONVERT(message_id USING utf8mb4) AS message_id,
       CONVERT(aggregate_id USING utf8mb4) AS aggregate_id, message_type,
       CONVERT(status USING utf8mb4) AS status, CAST(attempts AS SIGNED) AS attempts,
       received_at AS received_ms, available_at AS available_ms,
       lease_expires_at AS lease_ms, claimed_by, SUBSTRING(last_error, 1, 200) AS last_error,
       done_at AS done_ms, CAST(LENGTH(payload) AS SIGNED) AS payload_bytes
FROM {{schema}}.`{{prefix}}inbox_messages`
WHERE consumer_name = $1
  AND ($2 IS NULL OR status = $2)
  AND ($3 IS NULL OR aggregate_id = $3)
  AND message_id = $4
  AND ($5 IS NULL OR received_at >= $5)
  AND ($6 IS NULL OR received_at < $6)
  AND ($7 IS NULL OR LOCATE($7, payload) > 0)
  AND ($9 IS NULL
       OR (JSON_VALID(CONVERT(payload USING utf8mb4))
           AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(payload USING utf8mb4), CONCAT('$',
                 (SELECT GROUP_CONCAT(CONCAT('."', j.k, '"') ORDER BY j.n SEPARATOR '')
                  FROM JSON_TABLE($9, '$[*]' COLUMNS (n FOR ORDINALITY,
                                                       k VARCHAR(255) PATH '$')) AS j))))
               = $10))
ORDER BY id DESC
LIMIT $8
