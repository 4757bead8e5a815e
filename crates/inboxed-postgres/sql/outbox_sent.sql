-- outbox_sent: marks claimed rows sent after the broker confirmed them; the ids marked.
-- $1 row ids (int8[]), $2 claim token, $3 now (ms since the epoch; NULL: the database clock)
--
-- Fenced by the token: a relay whose lease ran out (and whose rows another relay claimed
-- again) marks nothing, and the other relay's publish stands. A re-send carries the same
-- message id, which the receiving inbox settles as a duplicate.
UPDATE {{schema}}."{{prefix}}outbox_messages"
SET status = 'sent',
    sent_at = coalesce(to_timestamp($3::float8 / 1000), now()),
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL
WHERE id = ANY($1) AND claim_token = $2 AND status = 'sending'
RETURNING id
