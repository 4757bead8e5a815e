-- purge_processed: deletes at most $3 of consumer $1's processed keys received before $2 (ms
-- since the epoch), oldest first; the caller repeats until a batch comes back short, each
-- batch its own short transaction under the retention's statement and lock bounds.
-- $1 consumer_name, $2 cut-off (ms), $3 limit
--
-- The walk is the received_at index's, in order. Under READ COMMITTED a row of another consumer
-- met on the way is read without being kept locked. received_at is UTC (the store's sessions
-- run in UTC), as FROM_UNIXTIME gives it.
DELETE FROM {{schema}}.`{{prefix}}{{processed}}`
WHERE consumer_name = $1 AND received_at < FROM_UNIXTIME($2 / 1000)
ORDER BY received_at
LIMIT $3
