-- forgive_attempt: counts a delivery of a key that never ran, committed on its own (see the
-- PostgreSQL file): its claim waited for another delivery's and gave up at the lock timeout.
-- $1 consumer_name, $2 message_id, $3 how many (1, or -1 to take one back; never below 0;
-- the column is signed, so the sum may dip below 0 before GREATEST lifts it)
INSERT INTO {{schema}}.`{{prefix}}attempts` (consumer_name, message_id, attempts, forgiven)
VALUES ($1, $2, 0, GREATEST($3, 0))
ON DUPLICATE KEY UPDATE forgiven = GREATEST(forgiven + $3, 0)
