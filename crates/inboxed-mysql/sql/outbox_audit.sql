-- outbox_audit: the record of an operator's retry or discard of dead outbox rows, in the same
-- transaction as the change.
-- $1 actor, $2 reason, $3 action ('outbox retry' or 'outbox discard'), $4 selector, $5 rows,
-- $6 ids (a JSON array)
INSERT INTO {{schema}}.`{{prefix}}redrive_audit`
    (at, actor, reason, consumer_name, selector, row_count, done_count, ids, action)
VALUES (FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), $1, $2, '', $4, $5, 0, $6, $3)
