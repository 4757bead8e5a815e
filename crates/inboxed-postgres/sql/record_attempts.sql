-- record_attempts: record_attempt for several distinct keys of one consumer in one
-- autocommitted statement, so that a batch pays one commit for its counts instead of one per
-- message. Returns each key with its new count (in no particular order), less the deliveries
-- forgiven (forgive_attempt.sql).
-- $1 consumer_name, $2 message ids (text[], distinct: one statement cannot update a row twice)
--
-- Rows are taken in byte order of the key (COLLATE "C", the order the processor claims and
-- clears them in), so concurrent batches with overlapping keys lock them in the same order.
INSERT INTO {{schema}}."{{prefix}}attempts" AS a (consumer_name, message_id, attempts)
SELECT $1, id, 1 FROM unnest($2::text[]) AS i(id) ORDER BY id COLLATE "C"
ON CONFLICT (consumer_name, message_id)
DO UPDATE SET attempts = a.attempts + 1, last_attempt_at = now()
RETURNING message_id, greatest(attempts - forgiven, 1)
