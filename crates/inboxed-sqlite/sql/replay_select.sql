-- replay_select: the rows a replay or re-drive would reset, and which were done.
-- ?1 consumer_name, ?2 ids (JSON array; NULL: any), ?3 aggregate_id (NULL: any),
-- ?4 received from (ms; NULL: open), ?5 received before (ms; NULL: open), ?6 include done
SELECT id, status = 'done' AS was_done
FROM {{schema}}."{{prefix}}inbox_messages"
WHERE consumer_name = ?1
  AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))
  AND (?3 IS NULL OR aggregate_id = ?3)
  AND (?4 IS NULL OR received_at >= ?4)
  AND (?5 IS NULL OR received_at < ?5)
  AND (status = 'dead' OR (status = 'done' AND ?6 AND payload_redacted = 0))
ORDER BY id
