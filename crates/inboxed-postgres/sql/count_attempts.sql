-- count_attempts: counts one more claim of each locked row, in a transaction of its own on
-- another connection, before any handler runs, so that a row whose handler kills the worker
-- reaches 'dead' after max_attempts although its own transaction never commits.
-- $1 consumer_name, $2 message ids (text[])
--
-- It uses the attempts table, not inbox_messages.attempts: the worker's own transaction holds
-- those rows locked, and writing them from here would wait on it forever. The store runs this
-- with synchronous_commit = off: losing the last counts in a server crash only delays poison
-- detection by an attempt, and it spares a disk flush per batch.
INSERT INTO {{schema}}."{{prefix}}attempts" AS a (consumer_name, message_id, attempts)
SELECT $1, m, 1 FROM unnest($2::text[]) AS m
ON CONFLICT (consumer_name, message_id)
DO UPDATE SET attempts = a.attempts + 1, last_attempt_at = now()
RETURNING message_id, attempts
