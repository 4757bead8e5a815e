-- replay_audit: the record of a replay or re-drive, in the same transaction as the reset.
-- $1 actor, $2 reason, $3 consumer_name, $4 selector, $5 rows, $6 done rows, $7 ids (JSON)
INSERT INTO {{schema}}.`{{prefix}}redrive_audit`
    (at, actor, reason, consumer_name, selector, row_count, done_count, ids)
VALUES (FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), $1, $2, $3, $4, $5, $6, $7)
