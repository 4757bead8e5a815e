-- release: a stopping worker hands back unfinished claims and gives back their attempt.
-- ?1 claim token, ?2 ids (JSON array; NULL: every row of the token)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'pending', attempts = max(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL
WHERE claim_token = ?1 AND status = 'processing'
  AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))
