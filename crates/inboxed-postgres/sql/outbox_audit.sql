-- outbox_audit: the record of an operator's retry or discard of dead outbox rows, in the same
-- transaction as the change (the table the inbox's replays write; no consumer owns the
-- outbox, so consumer_name is empty).
-- $1 actor, $2 reason, $3 action ('outbox retry' or 'outbox discard'), $4 filter (text),
-- $5 rows, $6 ids
INSERT INTO {{schema}}."{{prefix}}redrive_audit"
    (actor, reason, consumer_name, selector, row_count, done_count, ids, action)
VALUES ($1, $2, '', $4, $5, 0, $6, $3)
