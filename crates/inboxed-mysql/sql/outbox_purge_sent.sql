-- outbox_purge_sent: deletes at most $2 rows sent before $1 (ms), oldest first; dead rows stay
-- for an operator. The caller repeats until a batch comes back short, each batch its own
-- short transaction (purge_done.sql does the same for the inbox).
DELETE FROM {{schema}}.`{{prefix}}outbox_messages`
WHERE status = 'sent' AND sent_at < $1
ORDER BY sent_at
LIMIT $2
