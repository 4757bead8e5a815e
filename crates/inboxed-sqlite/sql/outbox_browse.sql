-- outbox_browse: outbox rows for an operator's console, newest first, filtered, without their
-- payloads (their size only).
-- ?1 status, ?2 destination, ?3 ordering_key, ?4 created from (ms), ?5 bytes the payload
-- contains (each NULL: any), ?6 limit, ?7 window: only the newest this many ids are searched,
-- ?8 a JSON path (a JSON array of keys; NULL: any) whose value, as text, is ?9
--
-- The window keeps a search bounded however large the table grows (see the PostgreSQL
-- version); a message id is looked up by outbox_load instead.
SELECT id, message_id, destination, ordering_key, message_type, correlation_id,
       headers, length(payload), status, attempts, created_at, available_at, sent_at,
       substr(last_error, 1, 200), claimed_by, caused_by_consumer, caused_by_message_id, X''
FROM {{schema}}."{{prefix}}outbox_messages"
WHERE (?1 IS NULL OR status = ?1)
  AND (?2 IS NULL OR destination = ?2)
  AND (?3 IS NULL OR ordering_key = ?3)
  AND (?4 IS NULL OR created_at >= ?4)
  AND (?5 IS NULL OR instr(payload, ?5) > 0)
  AND id > (SELECT coalesce(max(id), 0) FROM {{schema}}."{{prefix}}outbox_messages") - ?7
  AND (?8 IS NULL
       OR (json_valid(CAST(payload AS TEXT))
           AND (SELECT CASE json_type(CAST(payload AS TEXT), p.path)
                         WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                         ELSE CAST(json_extract(CAST(payload AS TEXT), p.path) AS TEXT) END
                FROM (SELECT '$' || group_concat('."' || value || '"', '') AS path
                      FROM (SELECT value FROM json_each(?8) ORDER BY key)) AS p) = ?9))
ORDER BY id DESC
LIMIT ?6
