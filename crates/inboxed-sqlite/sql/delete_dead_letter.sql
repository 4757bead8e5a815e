-- delete_dead_letter: removes the dead letter of a key (conflict records stay).
-- ?1 consumer_name, ?2 message_id
--
-- A retry runs this in the same transaction as the claim and the handler, so the dead letter
-- disappears only if the retry commits; a failed retry leaves it exactly as it was. A discard
-- runs it alone, after which the next delivery of the key is processed as new.
DELETE FROM {{schema}}."{{prefix}}dead_letters"
WHERE consumer_name = ?1 AND message_id = ?2 AND reason <> 'conflict'
