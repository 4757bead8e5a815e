-- outbox_release: a relay hands back claimed rows it did not publish (the broker was down, or
-- the relay is stopping), giving back the attempt counted at the claim; how many.
-- $1 claim token, $2 ids (a JSON array; NULL: every row of the token)
-- Through the claim token's index: only this claim's rows are examined.
UPDATE {{schema}}.`{{prefix}}outbox_messages`
    FORCE INDEX (`{{prefix}}outbox_messages_claim_token_idx`)
SET status = 'pending', attempts = GREATEST(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL
WHERE claim_token = $1 AND status = 'sending'
  AND ($2 IS NULL OR JSON_CONTAINS($2, CAST(id AS CHAR)))
