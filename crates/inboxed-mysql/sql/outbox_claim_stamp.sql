-- outbox_claim_stamp: the second of a claim's two statements (outbox_claim.sql says why two):
-- marks the rows it selected and locked as claimed, under a lease and the claim's token.
-- $1 ids (a JSON array), $2 relay id, $3 claim token, $4 lease (ms), $5 now (ms; NULL: the
-- server's clock)
--
-- A join from the list to the rows by primary key (claim_stamp.sql says why not `IN`).
UPDATE JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN {{schema}}.`{{prefix}}outbox_messages` m FORCE INDEX (PRIMARY) ON m.id = j.id
SET m.status = 'sending',
    m.attempts = m.attempts + 1,
    m.claimed_by = $2,
    m.claim_token = $3,
    m.lease_expires_at = coalesce($5, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)) + $4
