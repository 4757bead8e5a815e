-- outbox_select_dead: the dead rows an operator's retry or discard would touch, in insert
-- order (see the PostgreSQL version). The caller's write transaction holds SQLite's one write
-- lock, so no other writer changes them before the change and its audit record commit.
-- ?1 ids (JSON array; NULL: any), ?2 message_id (NULL: any), ?3 destination (NULL: any),
-- ?4 ordering_key (NULL: any)
SELECT id
FROM {{schema}}."{{prefix}}outbox_messages"
WHERE status = 'dead'
  AND (?1 IS NULL OR id IN (SELECT value FROM json_each(?1)))
  AND (?2 IS NULL OR message_id = ?2)
  AND (?3 IS NULL OR destination = ?3)
  AND (?4 IS NULL OR ordering_key = ?4)
ORDER BY id
