-- rows_list: store-then-process rows for an operator, newest first, filtered, without their
-- payloads (only their size).
-- ?1 consumer_name, ?2 status, ?3 aggregate_id, ?4 message_id, ?5 received from (ms),
-- ?6 received before (ms), ?7 bytes the payload contains (each NULL: any), ?8 limit,
-- ?9 window: only the newest this many ids are searched, ?10 a JSON path (a JSON array of
-- keys; NULL: any) whose value, as text, is ?11
--
-- The window keeps a search bounded however large the table grows (see the PostgreSQL
-- version); a consumer's message id is looked up by rows_by_key instead.
SELECT id, consumer_name, message_id, aggregate_id, message_type, status, attempts,
       received_at AS received_ms, available_at AS available_ms, lease_expires_at AS lease_ms,
       claimed_by, substr(last_error, 1, 200) AS last_error, done_at AS done_ms,
       length(payload) AS payload_bytes
FROM {{schema}}."{{prefix}}inbox_messages"
WHERE (?1 IS NULL OR consumer_name = ?1)
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR aggregate_id = ?3)
  AND (?4 IS NULL OR message_id = ?4)
  AND (?5 IS NULL OR received_at >= ?5)
  AND (?6 IS NULL OR received_at < ?6)
  AND (?7 IS NULL OR instr(payload, ?7) > 0)
  AND id > (SELECT coalesce(max(id), 0) FROM {{schema}}."{{prefix}}inbox_messages") - ?9
  AND (?10 IS NULL
       OR (json_valid(CAST(payload AS TEXT))
           AND (SELECT CASE json_type(CAST(payload AS TEXT), p.path)
                         WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                         ELSE CAST(json_extract(CAST(payload AS TEXT), p.path) AS TEXT) END
                FROM (SELECT '$' || group_concat('."' || value || '"', '') AS path
                      FROM (SELECT value FROM json_each(?10) ORDER BY key)) AS p) = ?11))
ORDER BY id DESC
LIMIT ?8
