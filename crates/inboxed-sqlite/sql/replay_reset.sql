-- replay_reset: puts the chosen rows back to pending, as new. ?1 ids (JSON array)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'pending', attempts = 0, available_at = CAST(unixepoch('subsec') * 1000 AS INTEGER),
    last_error = NULL, claim_token = NULL, lease_expires_at = NULL, claimed_by = NULL,
    done_at = NULL, group_limit = NULL
WHERE id IN (SELECT value FROM json_each(?1))
