-- replay_reset: puts the chosen rows (locked by replay_select) back to pending, as new.
-- $1 ids (a JSON array)
-- A join from the list by primary key (claim_stamp.sql says why not `id IN (…)`).
UPDATE JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN {{schema}}.`{{prefix}}inbox_messages` m FORCE INDEX (PRIMARY) ON m.id = j.id
SET m.status = 'pending', m.attempts = 0, m.available_at = FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000),
    m.last_error = NULL, m.claim_token = NULL, m.lease_expires_at = NULL, m.claimed_by = NULL,
    m.done_at = NULL, m.group_limit = NULL
