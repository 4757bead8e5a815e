-- outbox_discard: deletes dead rows an operator gives up on.
-- $1 row ids (a JSON array)
DELETE m FROM JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN {{schema}}.`{{prefix}}outbox_messages` m FORCE INDEX (PRIMARY) ON m.id = j.id
WHERE m.status = 'dead'
