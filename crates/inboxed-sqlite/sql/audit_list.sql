-- audit_list: the record of operators' replays, re-drives, dead-letter and outbox actions,
-- newest first. ?1 consumer_name (NULL: any), ?2 limit
SELECT id, at AS at_ms, actor, reason, action, consumer_name, selector, row_count, done_count,
       substr(ids, 1, 400) AS ids
FROM {{schema}}."{{prefix}}redrive_audit"
WHERE (?1 IS NULL OR consumer_name = ?1)
ORDER BY id DESC
LIMIT ?2
