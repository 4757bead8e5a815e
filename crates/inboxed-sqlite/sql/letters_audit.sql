-- letters_audit: the record of an operator's retry or discard of dead letters, in the same
-- transaction as the change.
-- ?1 actor, ?2 reason, ?3 consumer_name (empty when the letters were of several), ?4 the
-- filter, ?5 rows, ?6 dead-letter ids (JSON), ?7 action ('letter retry' or
-- 'letter discard')
INSERT INTO {{schema}}."{{prefix}}redrive_audit"
    (actor, reason, consumer_name, selector, row_count, done_count, ids, action)
VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?7)
