-- purge_redrive_audit: deletes at most ?2 re-drive audit records written before ?1 (ms since
-- the epoch), oldest first; the purger repeats it until a batch comes back short.
-- ?1 cut-off (ms), ?2 limit
DELETE FROM {{schema}}."{{prefix}}redrive_audit"
WHERE id IN (
    SELECT id FROM {{schema}}."{{prefix}}redrive_audit"
    WHERE at < ?1
    ORDER BY id
    LIMIT ?2
)
