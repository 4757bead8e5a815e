-- notify: wakes the idle workers of a consumer (they LISTEN on the channel), sent by the
-- receipt side after new rows committed, so listeners find them.
-- $1 channel, $2 consumer_name
--
-- One notifier per Inbox sends these one at a time and folds the wake-ups requested while one
-- is in flight into a single follow-up: committing a NOTIFY takes a database-wide lock, which
-- must not sit on every receipt's commit.
SELECT pg_notify($1, $2)
