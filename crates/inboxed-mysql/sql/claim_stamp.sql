-- claim_stamp: the second of a claim's two statements (claim_batch.sql says why two): marks the
-- rows it selected and locked as claimed, under a lease and the claim's token.
-- $1 ids (a JSON array), $2 worker id, $3 claim token, $4 lease (ms), $5 now (ms; NULL: the
-- server's clock)
--
-- A join from the list to the rows by primary key (STRAIGHT_JOIN keeps that order):
-- `WHERE id IN (SELECT … FROM JSON_TABLE …)` is planned as a scan of the whole table with the
-- list as a dependent subquery (EXPLAIN on MariaDB 10.11: every row of a 20,000-row table).
UPDATE JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN {{schema}}.`{{prefix}}inbox_messages` m FORCE INDEX (PRIMARY) ON m.id = j.id
SET m.status = 'processing',
    m.attempts = m.attempts + 1,
    m.claimed_at = coalesce($5, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)),
    m.claimed_by = $2,
    m.lease_expires_at = coalesce($5, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)) + $4,
    m.claim_token = $3
