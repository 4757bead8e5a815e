-- release: hands back rows a worker claimed but did not run (at shutdown, batch-mates of a
-- suspect row, a row over its key's rate limit) and gives back their attempt.
-- $1 claim token, $2 ids (a JSON array), $3 delay (ms) before the rows are claimable again
-- (0: as they were, so a row handed back at shutdown keeps its place)
-- Through the claim token's index: only this claim's rows are examined (complete_batch.sql
-- says why not `id IN (… JSON_TABLE …)`).
UPDATE {{schema}}.`{{prefix}}inbox_messages`
    FORCE INDEX (`{{prefix}}inbox_messages_claim_token_idx`)
SET status = 'pending', attempts = GREATEST(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL,
    available_at = IF($3 > 0, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) + $3, available_at)
WHERE claim_token = $1 AND status = 'processing'
  AND JSON_CONTAINS($2, CAST(id AS CHAR))
