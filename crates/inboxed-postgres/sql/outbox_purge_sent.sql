-- outbox_purge_sent: deletes at most $2 rows sent before $1 (ms since the epoch), oldest
-- first; how many. A sent row is only a record once the broker has it (the next service's
-- inbox is what deduplicates), so the window is the operator's choice of history, not a
-- correctness setting. Dead rows are never purged here: they wait for an operator. The caller
-- repeats until a batch comes back short; each batch is its own transaction, which bounds lock
-- time, WAL volume and replica lag.
DELETE FROM {{schema}}."{{prefix}}outbox_messages"
WHERE status = 'sent' AND sent_at < to_timestamp($1::float8 / 1000) AND id IN (
    SELECT id FROM {{schema}}."{{prefix}}outbox_messages"
    WHERE status = 'sent' AND sent_at < to_timestamp($1::float8 / 1000)
    ORDER BY sent_at
    LIMIT $2
)
