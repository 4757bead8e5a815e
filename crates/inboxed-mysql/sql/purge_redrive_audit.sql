-- purge_redrive_audit: deletes at most $2 audit records older than $1 (ms since the epoch),
-- oldest first; each batch its own short transaction.
-- $1 cut-off (ms), $2 limit
DELETE FROM {{schema}}.`{{prefix}}redrive_audit`
WHERE at < $1
ORDER BY id
LIMIT $2
