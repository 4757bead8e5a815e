-- delete_dead_letter: removes the dead letter of a key (conflict records stay). A retry runs
-- it in the transaction of its claim and handler, so the dead letter goes only if the retry
-- commits.
-- $1 consumer_name, $2 message_id
DELETE FROM {{schema}}.`{{prefix}}dead_letters`
WHERE consumer_name = $1 AND message_id = $2 AND reason <> 'conflict'
