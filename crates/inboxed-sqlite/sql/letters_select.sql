-- letters_select: the dead letters an operator's retry or discard would touch, oldest first,
-- with what decides whether each can be retried (no payload: a dry run over thousands of
-- letters stays small). The caller's write transaction holds SQLite's one write lock, so no
-- other writer changes them before the change and its audit record commit.
-- ?1 ids (JSON array; NULL: any), ?2 consumer_name, ?3 reason, ?4 failed since (ms since the
-- epoch), ?5 text the error contains (case-insensitively for ASCII), ?6 message type (each
-- NULL: any), ?7 limit, ?8 message id (NULL: any),
-- ?9 bytes the payload contains (NULL: any), ?10 a JSON path (a JSON array of keys;
-- NULL: any) whose value, as text, is ?11
SELECT id, consumer_name, message_id, reason, length(payload) AS payload_bytes
FROM {{schema}}."{{prefix}}dead_letters"
WHERE (?1 IS NULL OR id IN (SELECT value FROM json_each(?1)))
  AND (?2 IS NULL OR consumer_name = ?2)
  AND (?3 IS NULL OR reason = ?3)
  AND (?4 IS NULL OR (julianday(last_failed_at) - 2440587.5) * 86400000 >= ?4)
  AND (?5 IS NULL OR instr(lower(error), lower(?5)) > 0)
  AND (?6 IS NULL OR message_type = ?6)
  AND (?8 IS NULL OR message_id = ?8)
  AND (?9 IS NULL OR instr(payload, ?9) > 0)
  AND (?10 IS NULL
       OR (json_valid(CAST(payload AS TEXT))
           AND (SELECT CASE json_type(CAST(payload AS TEXT), p.path)
                         WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                         ELSE CAST(json_extract(CAST(payload AS TEXT), p.path) AS TEXT) END
                FROM (SELECT '$' || group_concat('."' || value || '"', '') AS path
                      FROM (SELECT value FROM json_each(?10) ORDER BY key)) AS p) = ?11))
ORDER BY id
LIMIT ?7
