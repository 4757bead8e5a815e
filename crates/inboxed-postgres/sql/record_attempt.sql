-- record_attempt: counts one more delivery of a key, in its own autocommitted statement,
-- before the handler runs. Returns the new count.
-- The count is of deliveries that ran: those forgiven (forgive.sql) are taken off (0 when all
-- are; the processor adds the uncounted first delivery of a broker that counts). Then the
-- forgiven ones, which size a suspect's group (crash attribution).
-- $1 consumer_name, $2 message_id
--
-- Autocommit is the point: the count must survive the handler's rollback and a process that
-- dies inside the handler.
INSERT INTO {{schema}}."{{prefix}}attempts" AS a (consumer_name, message_id, attempts)
VALUES ($1, $2, 1)
ON CONFLICT (consumer_name, message_id)
DO UPDATE SET attempts = a.attempts + 1, last_attempt_at = now()
RETURNING greatest(attempts - forgiven, 0), forgiven
