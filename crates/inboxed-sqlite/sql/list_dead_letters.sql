-- list_dead_letters: dead letters for an operator, newest failure first, filtered.
-- ?1 consumer_name (NULL: any), ?2 reason (NULL: any), ?3 failed since (ms since the epoch;
-- NULL: any time), ?4 text the error contains, case-insensitively for ASCII (NULL: any), ?5 limit,
-- ?6 message type (NULL: any), ?7 message id (NULL: any), ?8 window: only the newest this
-- many ids are searched (the largest integer: all; see the PostgreSQL version),
-- ?9 bytes the payload contains (NULL: any), ?10 a JSON path (a JSON array of keys; NULL:
-- any) whose value, as text, is ?11 (a payload that is not JSON never matches)
--
-- The payload itself is left out (only its size); `load_dead_letter_by_id` returns it. Failure
-- times are ISO-8601 text here and come back as milliseconds, as in every backend.
SELECT id, consumer_name, message_id, message_type, reason, attempts,
       CAST(round((julianday(last_failed_at) - 2440587.5) * 86400000) AS INTEGER) AS last_failed_ms,
       length(payload) AS payload_bytes,
       substr(error, 1, 200) AS error
FROM {{schema}}."{{prefix}}dead_letters"
WHERE (?1 IS NULL OR consumer_name = ?1)
  AND (?2 IS NULL OR reason = ?2)
  AND (?3 IS NULL OR (julianday(last_failed_at) - 2440587.5) * 86400000 >= ?3)
  AND (?4 IS NULL OR instr(lower(error), lower(?4)) > 0)
  AND (?6 IS NULL OR message_type = ?6)
  AND (?7 IS NULL OR message_id = ?7)
  AND (?9 IS NULL OR instr(payload, ?9) > 0)
  AND (?10 IS NULL
       OR (json_valid(CAST(payload AS TEXT))
           AND (SELECT CASE json_type(CAST(payload AS TEXT), p.path)
                         WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                         ELSE CAST(json_extract(CAST(payload AS TEXT), p.path) AS TEXT) END
                FROM (SELECT '$' || group_concat('."' || value || '"', '') AS path
                      FROM (SELECT value FROM json_each(?10) ORDER BY key)) AS p) = ?11))
  AND id > (SELECT coalesce(max(id), 0) FROM {{schema}}."{{prefix}}dead_letters") - ?8
ORDER BY last_failed_at DESC, id DESC
LIMIT ?5
