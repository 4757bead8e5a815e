-- outbox_select_dead: locks the dead rows an operator's retry or discard would touch, in
-- insert order.
-- $1 ids (bigint[]; NULL: any), $2 message_id (NULL: any), $3 destination (NULL: any),
-- $4 ordering_key (NULL: any)
--
-- Only dead rows: pending and sending rows are on their way, and a sent row re-sent under its
-- id would be settled as a duplicate downstream. FOR UPDATE holds them against a concurrent
-- operator until the change and its audit record commit.
SELECT id
FROM {{schema}}."{{prefix}}outbox_messages"
WHERE status = 'dead'
  AND ($1::bigint[] IS NULL OR id = ANY($1))
  AND ($2::text IS NULL OR message_id = $2)
  AND ($3::text IS NULL OR destination = $3)
  AND ($4::text IS NULL OR ordering_key = $4)
ORDER BY id
FOR UPDATE
