-- record_attempt: counts one more delivery of a key, committed on its own before the handler
-- runs, so the count survives the handler's rollback or a crash. Returns the new count.
-- $1 consumer_name, $2 message_id
--
-- Two statements, run in one transaction (MySQL has no RETURNING): the upsert's row lock is
-- held until the read, so the count read is this delivery's.
-- The count is of deliveries that ran: those forgiven (forgive.sql) are taken off (0 when all
-- are; the processor adds the uncounted first delivery of a broker that counts). Then the
-- forgiven ones, which size a suspect's group (crash attribution).
INSERT INTO {{schema}}.`{{prefix}}attempts` (consumer_name, message_id, attempts)
VALUES ($1, $2, 1)
ON DUPLICATE KEY UPDATE attempts = attempts + 1, last_attempt_at = CURRENT_TIMESTAMP(6);
SELECT GREATEST(attempts - forgiven, 0), forgiven FROM {{schema}}.`{{prefix}}attempts`
WHERE consumer_name = $1 AND message_id = $2
