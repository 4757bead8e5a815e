-- outbox_delete_sent: deletes claimed rows the broker confirmed, in place of marking them
-- sent, for a relay that keeps no sent rows; the ids deleted (see the PostgreSQL version).
-- ?1 row ids (a JSON array), ?2 claim token
DELETE FROM {{schema}}."{{prefix}}outbox_messages"
WHERE id IN (SELECT value FROM json_each(?1)) AND claim_token = ?2 AND status = 'sending'
RETURNING id
