-- release: a worker shutting down hands back the rows it claimed but did not finish. Their
-- handlers never ran to the end, so the attempt counted at claim time is given back.
-- $1 claim token, $2 ids (bigint[]; NULL: every row of the token)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'pending', attempts = greatest(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL
WHERE claim_token = $1 AND status = 'processing' AND ($2::bigint[] IS NULL OR id = ANY($2))
