-- delete_dead_letter_by_id: an operator's discard, or the end of a retry that has stored the
-- message elsewhere. $1 id. No row: it was already gone.
-- No DELETE … RETURNING on MySQL: the row is locked and read (the operation's row), then
-- deleted, in one transaction.
--! rows
SELECT id FROM {{schema}}.`{{prefix}}dead_letters` WHERE id = $1 FOR UPDATE;
DELETE FROM {{schema}}.`{{prefix}}dead_letters` WHERE id = $1
