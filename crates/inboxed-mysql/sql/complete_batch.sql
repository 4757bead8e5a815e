-- complete_batch: marks the rows of a batch done in the handler's transaction, fenced by the
-- claim token, and returns the ids it marked (the others' claims were lost).
-- $1 ids (a JSON array), $2 claim token
--
-- No UPDATE … RETURNING: the rows still held are locked and read first (the rows this
-- operation returns), then updated; the lock keeps anyone from changing them in between. Both
-- statements reach the rows through the claim token's index, so they examine (and lock) only
-- this claim's rows: `id IN (SELECT … FROM JSON_TABLE …)` made MariaDB scan the table, a
-- locking read then waited on other workers' rows, and two workers deadlocked.
-- First the check that this transaction is still the one the store began (complete.sql says
-- why): without it, a batch whose transaction a deadlock rolled back under a handler that
-- swallowed the error was marked done on its own, the effects of its first rows lost.
RELEASE SAVEPOINT inboxed_settle;
--! rows
SELECT id FROM {{schema}}.`{{prefix}}inbox_messages`
    FORCE INDEX (`{{prefix}}inbox_messages_claim_token_idx`)
WHERE claim_token = $2 AND status = 'processing' AND JSON_CONTAINS($1, CAST(id AS CHAR))
FOR UPDATE;
UPDATE {{schema}}.`{{prefix}}inbox_messages`
    FORCE INDEX (`{{prefix}}inbox_messages_claim_token_idx`)
SET status = 'done', done_at = FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), claim_token = NULL,
    lease_expires_at = NULL, last_error = NULL
WHERE claim_token = $2 AND status = 'processing' AND JSON_CONTAINS($1, CAST(id AS CHAR))
