-- complete: marks a claimed row done inside its handler's transaction, fenced by the claim
-- token: a worker whose lease was reaped and whose row was claimed again changes nothing.
-- $1 id, $2 claim token
--
-- First the check that this transaction is still the one the store began (clear_attempts.sql
-- says why): InnoDB rolls a deadlock victim's whole transaction back, and a handler that
-- swallowed the error carries on outside any; marking the row done then would commit it on its
-- own, without the effects the deadlock took. Both in one round trip; the row count is the
-- update's.
--! one round trip
RELEASE SAVEPOINT inboxed_settle;
UPDATE {{schema}}.`{{prefix}}inbox_messages`
SET status = 'done', done_at = FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), claim_token = NULL,
    lease_expires_at = NULL, last_error = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
