-- clear_many_attempts: clear_attempts for several keys of one consumer in one statement,
-- inside the batch's transaction (which holds SQLite's single write lock, so the order in
-- which rows go does not matter here).
-- ?1 consumer_name, ?2 message ids as a JSON array of strings
DELETE FROM {{schema}}."{{prefix}}attempts"
WHERE consumer_name = ?1 AND message_id IN (SELECT value FROM json_each(?2))
