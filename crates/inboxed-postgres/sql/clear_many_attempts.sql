-- clear_many_attempts: clear_attempts for several keys of one consumer in one statement,
-- inside the batch's transaction; like it, it also fails when a handler left the transaction
-- aborted, which is what keeps such a batch from committing.
-- $1 consumer_name, $2 message ids (text[])
--
-- The rows are locked in byte order of the id (COLLATE "C"), as record_attempts takes them,
-- so that this batch and a concurrent count of the same keys cannot deadlock.
DELETE FROM {{schema}}."{{prefix}}attempts"
WHERE (consumer_name, message_id) IN (
    SELECT consumer_name, message_id FROM {{schema}}."{{prefix}}attempts"
    WHERE consumer_name = $1 AND message_id = ANY($2::text[])
    ORDER BY message_id COLLATE "C"
    FOR UPDATE
)
