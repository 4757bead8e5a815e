-- purge_dead_letters: deletes at most ?2 dead letters whose last failure was before ?1 (ms
-- since the epoch), oldest first; the purger repeats it until a batch comes back short.
-- ?1 cut-off (ms), ?2 limit
--
-- As on PostgreSQL (see that file). last_failed_at is ISO 8601 text, so the cut-off is
-- rendered in that form, which sorts in time order.
DELETE FROM {{schema}}."{{prefix}}dead_letters"
WHERE id IN (
    SELECT id FROM {{schema}}."{{prefix}}dead_letters"
    WHERE last_failed_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?1 / 1000.0, 'unixepoch')
    ORDER BY id
    LIMIT ?2
)
