-- outbox_retry: dead rows back to pending with a fresh count of attempts, now.
-- $1 row ids (a JSON array)
UPDATE JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN {{schema}}.`{{prefix}}outbox_messages` m FORCE INDEX (PRIMARY) ON m.id = j.id
SET m.status = 'pending', m.attempts = 0,
    m.available_at = FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), m.last_error = NULL,
    m.claim_token = NULL, m.lease_expires_at = NULL, m.claimed_by = NULL, m.group_limit = NULL
WHERE m.status = 'dead'
