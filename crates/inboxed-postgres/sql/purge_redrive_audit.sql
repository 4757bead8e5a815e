-- purge_redrive_audit: deletes at most $2 re-drive audit records written before $1 (ms since
-- the epoch), oldest first; the purger repeats it until a batch comes back short.
-- $1 cut-off (ms), $2 limit
--
-- The audit is kept as long as its own window says (compliance, not dedup, decides it); ids
-- grow with time, so the oldest records are found along the primary key.
DELETE FROM {{schema}}."{{prefix}}redrive_audit"
WHERE id IN (
    SELECT id FROM {{schema}}."{{prefix}}redrive_audit"
    WHERE at < to_timestamp($1::float8 / 1000)
    ORDER BY id
    LIMIT $2
)
