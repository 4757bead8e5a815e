-- release: hands back rows a worker claimed but did not run (at shutdown, batch-mates of a
-- suspect row, a row over its key's rate limit) and gives back their attempt.
-- ?1 claim token, ?2 ids (JSON array), ?3 delay (ms) before the rows are claimable again (0:
-- as they were, so a row handed back at shutdown keeps its place)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'pending', attempts = max(attempts - 1, 0), claim_token = NULL,
    lease_expires_at = NULL, claimed_by = NULL,
    available_at = CASE WHEN ?3 > 0 THEN CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?3
                        ELSE available_at END
WHERE claim_token = ?1 AND status = 'processing'
  AND id IN (SELECT value FROM json_each(?2))
