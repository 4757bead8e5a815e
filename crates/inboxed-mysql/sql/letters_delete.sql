-- letters_delete: deletes the dead letters an operator discarded, or retried into their
-- consumer's inbox, in the transaction that selected (and locked) them.
-- $1 ids (a JSON array)
DELETE d FROM JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j
STRAIGHT_JOIN {{schema}}.`{{prefix}}dead_letters` d FORCE INDEX (PRIMARY) ON d.id = j.id
