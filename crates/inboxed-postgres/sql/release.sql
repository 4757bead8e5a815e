-- release: hands back rows a worker claimed but did not run: at shutdown, the batch-mates of a
-- suspect row, a row over its key's rate limit. Their handlers never ran to the end, so the
-- attempt counted at claim time is given back.
-- $1 claim token, $2 ids (bigint[]), $3 delay (ms) before the rows are claimable again (0: as
-- they were, so a row handed back at shutdown keeps its place)
--
-- By id, through the primary key (no index holds the tokens: migration 19); the token fences.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'pending', attempts = greatest(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL,
    available_at = CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 millisecond'
                        ELSE available_at END
WHERE id = ANY($2::bigint[]) AND claim_token = $1 AND status = 'processing'
