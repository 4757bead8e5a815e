-- outbox_discard: deletes dead rows chosen by outbox_select_dead; their ordering keys' later
-- rows are then free to go.
-- $1 ids (bigint[])
DELETE FROM {{schema}}."{{prefix}}outbox_messages"
WHERE id = ANY($1) AND status = 'dead'
