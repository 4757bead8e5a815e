-- release: a stopping worker hands back unfinished claims and gives back their attempt.
-- ?1 claim token
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'pending', attempts = max(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL
WHERE claim_token = ?1 AND status = 'processing'
