-- letters_delete: deletes the dead letters an operator discarded, or retried into their
-- consumer's inbox, in the transaction that selected them.
-- $1 ids (bigint[])
DELETE FROM {{schema}}."{{prefix}}dead_letters" WHERE id = ANY($1)
