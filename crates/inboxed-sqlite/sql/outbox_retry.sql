-- outbox_retry: dead rows chosen by outbox_select_dead back to pending, as new (see the
-- PostgreSQL version).
-- ?1 ids (JSON array)
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = 'pending', attempts = 0,
    available_at = CAST(unixepoch('subsec') * 1000 AS INTEGER), last_error = NULL,
    claim_token = NULL, lease_expires_at = NULL, claimed_by = NULL, group_limit = NULL
WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'dead'
