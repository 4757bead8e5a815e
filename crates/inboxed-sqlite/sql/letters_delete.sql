-- letters_delete: deletes the dead letters an operator discarded, or retried into their
-- consumer's inbox, in the transaction that selected them.
-- ?1 ids (JSON array)
DELETE FROM {{schema}}."{{prefix}}dead_letters" WHERE id IN (SELECT value FROM json_each(?1))
