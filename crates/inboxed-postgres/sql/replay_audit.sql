-- replay_audit: the record of a replay or re-drive, in the same transaction as the reset.
-- $1 actor, $2 reason, $3 consumer_name, $4 selector (text), $5 rows, $6 done rows, $7 ids
INSERT INTO {{schema}}."{{prefix}}redrive_audit"
    (actor, reason, consumer_name, selector, row_count, done_count, ids)
VALUES ($1, $2, $3, $4, $5, $6, $7)
