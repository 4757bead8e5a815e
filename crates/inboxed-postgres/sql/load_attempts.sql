-- load_attempts: the attempt counters of several keys of one consumer, read without counting:
-- a batch whose keys were tried before (a crash took down an earlier batch) is processed one
-- message at a time, each counted only when it is reached, so that only the message that
-- crashes is charged for the crashes. Keys without a counter are left out; the deliveries
-- forgiven (forgive_attempt.sql) are taken off.
-- $1 consumer_name, $2 message ids (text[])
SELECT message_id, greatest(attempts - forgiven, 0)
FROM {{schema}}."{{prefix}}attempts"
WHERE consumer_name = $1 AND message_id = ANY($2::text[])
