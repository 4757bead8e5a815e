-- outbox_sent: marks claimed rows sent after the broker confirmed them; the ids marked.
-- ?1 row ids (a JSON array), ?2 claim token, ?3 now (ms; NULL: the clock of this process)
--
-- Fenced by the token, as on PostgreSQL.
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = 'sent',
    sent_at = coalesce(?3, CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL
WHERE id IN (SELECT value FROM json_each(?1)) AND claim_token = ?2 AND status = 'sending'
RETURNING id
