-- outbox_purge_sent: deletes at most ?2 rows sent before ?1 (ms), oldest first; dead rows stay
-- for an operator. The caller repeats until a batch comes back short (see the PostgreSQL
-- version).
DELETE FROM {{schema}}."{{prefix}}outbox_messages"
WHERE status = 'sent' AND sent_at < ?1 AND id IN (
    SELECT id FROM {{schema}}."{{prefix}}outbox_messages"
    WHERE status = 'sent' AND sent_at < ?1
    ORDER BY sent_at
    LIMIT ?2
)
