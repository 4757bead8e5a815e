-- outbox_list: the rows an operator's filter selects, oldest first, without their payloads
-- (see the PostgreSQL version).
-- ?1 ids (JSON array; NULL: any), ?2 message_id (NULL: any), ?3 status (NULL: any),
-- ?4 destination (NULL: any), ?5 ordering_key (NULL: any), ?6 limit
SELECT id, message_id, destination, ordering_key, message_type, correlation_id,
       headers, length(payload), status, attempts, created_at, available_at, sent_at,
       last_error, claimed_by, caused_by_consumer, caused_by_message_id, X''
FROM {{schema}}."{{prefix}}outbox_messages"
WHERE (?1 IS NULL OR id IN (SELECT value FROM json_each(?1)))
  AND (?2 IS NULL OR message_id = ?2)
  AND (?3 IS NULL OR status = ?3)
  AND (?4 IS NULL OR destination = ?4)
  AND (?5 IS NULL OR ordering_key = ?5)
ORDER BY id
LIMIT ?6
