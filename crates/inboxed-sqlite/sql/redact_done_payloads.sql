-- redact_done_payloads: empties the stored payload of at most ?2 done inbox rows finished
-- before ?1 (ms since the epoch), oldest first; the purger repeats it until a batch comes back
-- short. The row stays as dedup memory (see the PostgreSQL file).
-- ?1 cut-off (ms), ?2 limit
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET payload = X''
WHERE status = 'done' AND id IN (
    SELECT id FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'done' AND done_at < ?1 AND length(payload) > 0
    ORDER BY done_at
    LIMIT ?2
)
