-- audit_list: the record of operators' replays, re-drives, dead-letter and outbox actions,
-- newest first. $1 consumer_name (NULL: any), $2 limit
--
-- Walks the primary key backwards: the newest records, however long the trail.
SELECT id, (extract(epoch FROM at) * 1000)::bigint AS at_ms, actor, reason, action,
       consumer_name, selector, row_count, done_count,
       left(array_to_string(ids, ','), 400) AS ids
FROM {{schema}}."{{prefix}}redrive_audit"
WHERE ($1::text IS NULL OR consumer_name = $1)
ORDER BY id DESC
LIMIT $2
