-- delete_dead_letter_by_id: an operator's discard, or the end of a retry that has stored the
-- message elsewhere. $1 id. No row: it was already gone.
DELETE FROM {{schema}}."{{prefix}}dead_letters" WHERE id = $1 RETURNING id
