-- outbox_delete_sent: deletes claimed rows in place of marking them sent (a relay configured
-- to keep no sent rows); the ids deleted.
-- $1 row ids (a JSON array), $2 claim token
--
-- Fenced by the token; the rows are locked and read first, then deleted, both through the
-- claim token's index (outbox_sent.sql).
--! rows
SELECT id FROM {{schema}}.`{{prefix}}outbox_messages`
    FORCE INDEX (`{{prefix}}outbox_messages_claim_token_idx`)
WHERE claim_token = $2 AND status = 'sending' AND JSON_CONTAINS($1, CAST(id AS CHAR))
FOR UPDATE;
DELETE m FROM {{schema}}.`{{prefix}}outbox_messages` m
    FORCE INDEX (`{{prefix}}outbox_messages_claim_token_idx`)
WHERE claim_token = $2 AND status = 'sending' AND JSON_CONTAINS($1, CAST(id AS CHAR))
