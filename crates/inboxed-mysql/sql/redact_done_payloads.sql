-- redact_done_payloads: empties the payloads of at most $2 done store-then-process rows
-- finished before $1 (ms since the epoch), oldest first, and marks them (migration 2's
-- payload_redacted), so that no replay runs a handler on nothing.
-- $1 cut-off (ms), $2 limit
UPDATE {{schema}}.`{{prefix}}inbox_messages`
SET payload = '', payload_redacted = TRUE
WHERE status = 'done' AND NOT payload_redacted AND done_at < $1
ORDER BY done_at
LIMIT $2
