-- outbox_sent: marks claimed rows sent after the broker confirmed them; the ids marked.
-- $1 row ids (a JSON array), $2 claim token, $3 now (ms; NULL: the server's clock)
--
-- Fenced by the token, as on PostgreSQL: a relay whose lease ran out marks nothing. No
-- UPDATE … RETURNING: the rows still held are locked and read first (the rows this operation
-- returns), then updated, both through the claim token's index (complete_batch.sql says why).
--! rows
SELECT id FROM {{schema}}.`{{prefix}}outbox_messages`
    FORCE INDEX (`{{prefix}}outbox_messages_claim_token_idx`)
WHERE claim_token = $2 AND status = 'sending' AND JSON_CONTAINS($1, CAST(id AS CHAR))
FOR UPDATE;
UPDATE {{schema}}.`{{prefix}}outbox_messages`
    FORCE INDEX (`{{prefix}}outbox_messages_claim_token_idx`)
SET status = 'sent',
    sent_at = coalesce($3, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)),
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL
WHERE claim_token = $2 AND status = 'sending' AND JSON_CONTAINS($1, CAST(id AS CHAR))
