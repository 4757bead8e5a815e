-- extend_leases: the heartbeat of a worker whose handlers are still running.
-- $1 claim token, $2 lease (ms), $3 now (ms; NULL: the database clock)
UPDATE {{schema}}."{{prefix}}inbox_messages"
SET lease_expires_at = coalesce(to_timestamp($3::float8 / 1000), now()) + $2 * interval '1 millisecond'
WHERE claim_token = $1 AND status = 'processing'
