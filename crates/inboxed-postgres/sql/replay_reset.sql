-- replay_reset: puts the rows chosen by replay_select back to pending, as new.
-- $1 ids (bigint[])
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET status = 'pending', attempts = 0, available_at = now(), last_error = NULL,
    claim_token = NULL, lease_expires_at = NULL, claimed_by = NULL, done_at = NULL,
    group_limit = NULL
WHERE id = ANY($1)
