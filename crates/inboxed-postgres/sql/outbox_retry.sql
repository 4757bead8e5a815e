-- outbox_retry: dead rows chosen by outbox_select_dead back to pending, as new: no attempts,
-- no backoff, no error, no batch limit from a relay's death. They keep their message id, so a consumer downstream that had them
-- already settles them as duplicates.
-- $1 ids (bigint[])
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = 'pending', attempts = 0, available_at = now(), last_error = NULL,
    claim_token = NULL, lease_expires_at = NULL, claimed_by = NULL, group_limit = NULL
WHERE id = ANY($1) AND status = 'dead'
