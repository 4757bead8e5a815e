-- redact_done_payloads: empties the stored payload of at most $2 done inbox rows finished
-- before $1 (ms since the epoch), oldest first; the purger repeats it until a batch comes back
-- short.
-- $1 cut-off (ms), $2 limit
--
-- The row itself stays: it is the store-then-process variant's dedup memory until purge_done
-- removes it, and its payload_hash still detects a conflicting redelivery. Only the payload,
-- which may hold personal data and is no longer needed once the row is done, goes earlier. A
-- redacted row is marked (migration 6) and left out of re-drives, which would run its handler
-- on nothing. The conditions are rechecked on the outer row, as in purge_done, in case a
-- re-drive reset and finished it meanwhile.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET payload = '\x'::bytea, payload_redacted = true
WHERE status = 'done' AND NOT payload_redacted AND done_at < to_timestamp($1::float8 / 1000)
  AND id IN (
    SELECT id FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'done' AND NOT payload_redacted
      AND done_at < to_timestamp($1::float8 / 1000)
    ORDER BY done_at
    LIMIT $2
)
