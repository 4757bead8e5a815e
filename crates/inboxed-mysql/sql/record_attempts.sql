-- record_attempts: record_attempt for several distinct keys of one consumer, committed on its
-- own, so that a batch pays one commit for its counts. Returns each key with its new count,
-- less the deliveries forgiven (forgive_attempt.sql).
-- $1 consumer_name, $2 message ids as a JSON array of strings (distinct)
--
-- As record_attempt.sql, two statements in one transaction. JSON_TABLE reads the list (MySQL
-- binds no arrays); the rows are upserted in key order, the order clear_many_attempts.sql
-- deletes them in, so that two batches sharing keys wait on each other instead of
-- deadlocking.
INSERT INTO {{schema}}.`{{prefix}}attempts` (consumer_name, message_id, attempts)
SELECT $1, k.id, 1
FROM JSON_TABLE($2, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k
ORDER BY CAST(k.id AS BINARY)
ON DUPLICATE KEY UPDATE attempts = attempts + 1, last_attempt_at = CURRENT_TIMESTAMP(6);
SELECT STRAIGHT_JOIN CONVERT(a.message_id USING utf8mb4), GREATEST(a.attempts - a.forgiven, 1)
FROM JSON_TABLE($2, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k
JOIN {{schema}}.`{{prefix}}attempts` a
    ON a.consumer_name = $1 AND a.message_id = CAST(k.id AS BINARY)
