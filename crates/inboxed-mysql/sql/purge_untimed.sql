-- purge_untimed: partitioned mode's row purge of the keys whose ids have no UUIDv7 time
-- (partition p1, id_ms = 0), which no partition drop reaches: at most $3 of consumer $1's
-- received before $2 (ms since the epoch), oldest first, as purge_processed.sql deletes them on
-- the plain table (it says how the batches go). The keys of the time partitions go with their
-- partitions.
-- $1 consumer_name, $2 cut-off (ms), $3 limit
--
-- id_ms = 0 prunes the statement to p1; its walk is p1's part of the received_at index.
DELETE FROM {{schema}}.`{{prefix}}processed_log`
WHERE id_ms = 0 AND consumer_name = $1 AND received_at < FROM_UNIXTIME($2 / 1000)
ORDER BY received_at
LIMIT $3
