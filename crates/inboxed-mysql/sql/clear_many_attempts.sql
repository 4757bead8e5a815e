-- clear_many_attempts: clear_attempts for several keys of one consumer in one statement,
-- inside the batch's transaction, with clear_attempts.sql's check that the transaction is
-- still the one the store began; the rows are locked in key order (the primary key's), as
-- record_attempts.sql upserts them.
-- $1 consumer_name, $2 message ids as a JSON array of strings
--! one round trip
RELEASE SAVEPOINT inboxed_settle;
DELETE FROM {{schema}}.`{{prefix}}attempts`
WHERE consumer_name = $1 AND message_id IN (
    SELECT CAST(k.id AS BINARY)
    FROM JSON_TABLE($2, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k
)
