-- release: a stopping worker hands back unfinished claims and gives back their attempt.
-- $1 claim token, $2 ids (a JSON array; NULL: every row of the token)
-- Through the claim token's index: only this claim's rows are examined (complete_batch.sql
-- says why not `id IN (… JSON_TABLE …)`).
UPDATE {{schema}}.`{{prefix}}inbox_messages`
    FORCE INDEX (`{{prefix}}inbox_messages_claim_token_idx`)
SET status = 'pending', attempts = GREATEST(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL
WHERE claim_token = $1 AND status = 'processing'
  AND ($2 IS NULL OR JSON_CONTAINS($2, CAST(id AS CHAR)))
