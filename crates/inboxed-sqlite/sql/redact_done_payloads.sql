-- redact_done_payloads: empties the stored payload of at most ?2 done inbox rows finished
-- before ?1 (ms since the epoch), oldest first; the purger repeats it until a batch comes back
-- short. The row stays as dedup memory (see the PostgreSQL file).
-- ?1 cut-off (ms), ?2 limit
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET payload = X'', payload_redacted = 1
WHERE id IN (
    SELECT id FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'done' AND payload_redacted = 0 AND done_at < ?1
    ORDER BY done_at
    LIMIT ?2
)
