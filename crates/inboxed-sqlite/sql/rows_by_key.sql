-- rows_by_key: rows_list for a consumer's message id, a unique key: looked up through it,
-- wherever the row is (no window), under a generic plan too (plain equalities, not the list's
-- optional ones).
-- ?1 consumer_name, ?2 status, ?3 aggregate_id, ?4 message_id, ?5 received from (ms),
-- ?6 received before (ms), ?7 bytes the payload contains (each but ?1 and ?4 NULL: any),
-- ?8 limit, ?9 a JSON path (a JSON array of keys; NULL: any) whose value, as text, is
-- ?10
SELECT id, consumer_name, message_id, aggregate_id, message_type, status, attempts,
       received_at AS received_ms, available_at AS available_ms, lease_expires_at AS lease_ms,
       claimed_by, substr(last_error, 1, 200) AS last_error, done_at AS done_ms,
       length(payload) AS payload_bytes
FROM {{schema}}."{{prefix}}inbox_messages"
WHERE consumer_name = ?1
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR aggregate_id = ?3)
  AND message_id = ?4
  AND (?5 IS NULL OR received_at >= ?5)
  AND (?6 IS NULL OR received_at < ?6)
  AND (?7 IS NULL OR instr(payload, ?7) > 0)
  AND (?9 IS NULL
       OR (json_valid(CAST(payload AS TEXT))
           AND (SELECT CASE json_type(CAST(payload AS TEXT), p.path)
                         WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                         ELSE CAST(json_extract(CAST(payload AS TEXT), p.path) AS TEXT) END
                FROM (SELECT '$' || group_concat('."' || value || '"', '') AS path
                      FROM (SELECT value FROM json_each(?9) ORDER BY key)) AS p) = ?10))
ORDER BY id DESC
LIMIT ?8
