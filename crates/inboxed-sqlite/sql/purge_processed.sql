-- purge_processed: deletes at most ?3 processed keys of consumer ?1 received before ?2 (ms
-- since the epoch), oldest first.
-- ?1 consumer_name, ?2 cut-off (ms), ?3 limit
--
-- Run under BEGIN IMMEDIATE with the busy timeout as its lock bound, repeated by the purger
-- until a batch comes back short: SQLite has one writer, so a bounded batch is what keeps the
-- hot path's commits from waiting long behind the purge. The cut-off is rendered in the
-- column's ISO 8601 text form, which sorts in time order; rows are found through
-- (consumer_name, received_at).
DELETE FROM {{schema}}."{{prefix}}processed_messages"
WHERE consumer_name = ?1 AND message_id IN (
    SELECT message_id FROM {{schema}}."{{prefix}}processed_messages"
    WHERE consumer_name = ?1
      AND received_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?2 / 1000.0, 'unixepoch')
    ORDER BY received_at
    LIMIT ?3
)
