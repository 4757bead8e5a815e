-- record_attempts: record_attempt for several distinct keys of one consumer in one
-- autocommitted statement, so that a batch pays one commit for its counts instead of one per
-- message. Returns each key with its new count (in no particular order), less the deliveries
-- forgiven (forgive_attempt.sql).
-- ?1 consumer_name, ?2 message ids as a JSON array of strings (distinct)
--
-- `WHERE true` tells SQLite's parser that ON CONFLICT belongs to the INSERT, not to a join.
INSERT INTO {{schema}}."{{prefix}}attempts" (consumer_name, message_id, attempts)
SELECT ?1, value, 1 FROM json_each(?2) WHERE true
ON CONFLICT (consumer_name, message_id)
DO UPDATE SET attempts = attempts + 1,
              last_attempt_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
RETURNING message_id, max(attempts - forgiven, 1)
