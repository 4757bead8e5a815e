-- outbox_release: a relay hands back claimed rows it did not publish (the broker was down, or
-- the relay is stopping); how many. Nothing reached the broker for them, so the attempt
-- counted at the claim is given back: a broker down for an hour does not use up the rows'
-- attempts.
-- $1 claim token, $2 ids (bigint[]; NULL: every row of the token)
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = 'pending', attempts = greatest(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL
WHERE claim_token = $1 AND status = 'sending' AND ($2::bigint[] IS NULL OR id = ANY($2))
