-- extend_leases: the heartbeat of a worker whose handlers are still running.
-- $1 claim token, $2 lease (ms), $3 now (ms; NULL: the database clock), $4 the batch's ids
-- (bigint[])
--
-- By id, through the primary key: no index holds the tokens (migration 19), and the token
-- still fences the rows, so a row reaped and claimed again by another worker is passed over.
-- SKIP LOCKED: rows the batch's own transaction has already completed (and so holds locked)
-- are passed over instead of waited for; the reaper cannot take them either, since it skips
-- locked rows too. Waiting here would stall every later heartbeat until the batch commits.
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET lease_expires_at = coalesce(to_timestamp($3::float8 / 1000), now()) + $2 * interval '1 millisecond'
WHERE id IN (
    SELECT id FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE id = ANY($4::bigint[]) AND claim_token = $1 AND status = 'processing'
    FOR UPDATE SKIP LOCKED
)
