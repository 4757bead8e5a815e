-- load_forgiven: how many deliveries of a key never ran (forgive_attempt.sql), read on a
-- redelivery whose attempt number is the broker's count, to take them off it. No row: none.
-- $1 consumer_name, $2 message_id
SELECT forgiven FROM {{schema}}."{{prefix}}attempts"
WHERE consumer_name = $1 AND message_id = $2
