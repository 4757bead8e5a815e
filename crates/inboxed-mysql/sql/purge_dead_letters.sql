-- purge_dead_letters: deletes at most $2 dead letters whose last failure is older than $1 (ms
-- since the epoch), oldest rows first; each batch its own short transaction.
-- $1 cut-off (ms), $2 limit
DELETE FROM {{schema}}.`{{prefix}}dead_letters`
WHERE last_failed_at < FROM_UNIXTIME($1 / 1000)
ORDER BY id
LIMIT $2
