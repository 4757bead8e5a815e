-- outbox_discard: deletes dead rows chosen by outbox_select_dead; their ordering keys' later
-- rows are then free to go.
-- ?1 ids (JSON array)
DELETE FROM {{schema}}."{{prefix}}outbox_messages"
WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'dead'
