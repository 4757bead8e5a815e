-- purge_done: deletes at most $2 done rows finished before $1 (ms), oldest first; the caller
-- repeats until a batch comes back short, each batch its own short transaction.
DELETE FROM {{schema}}.`{{prefix}}inbox_messages`
WHERE status = 'done' AND done_at < $1
ORDER BY done_at
LIMIT $2
