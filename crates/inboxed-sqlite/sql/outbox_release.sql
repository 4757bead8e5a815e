-- outbox_release: a relay hands back claimed rows it did not publish (the broker was down, or
-- the relay is stopping), giving back the attempt counted at the claim; how many.
-- ?1 claim token, ?2 ids (JSON array; NULL: every row of the token)
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = 'pending', attempts = max(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL
WHERE claim_token = ?1 AND status = 'sending'
  AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))
