-- clear_attempts: forgets a key's attempt counter inside the transaction that settles it.
-- $1 consumer_name, $2 message_id
DELETE FROM {{schema}}.`{{prefix}}attempts`
WHERE consumer_name = $1 AND message_id = $2
