-- extend_leases: the heartbeat; moves on the lease of every row still held under a token.
-- $1 claim token, $2 lease (ms), $3 now (ms; NULL: the server's clock); $4 the batch's ids,
-- not read: the claim token's index finds the rows (complete_batch.sql says why not by id)
-- Counts the rows matched, moved or not (sqlx sets CLIENT_FOUND_ROWS).
UPDATE {{schema}}.`{{prefix}}inbox_messages`
SET lease_expires_at = coalesce($3, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)) + $2
WHERE claim_token = $1 AND status = 'processing'
