-- forgive_attempt: counts a delivery of a key that never ran, committed on its own (see the
-- PostgreSQL file): its claim waited for another delivery's and gave up at the lock timeout.
-- $1 consumer_name, $2 message_id
INSERT INTO {{schema}}.`{{prefix}}attempts` (consumer_name, message_id, attempts, forgiven)
VALUES ($1, $2, 0, 1)
ON DUPLICATE KEY UPDATE forgiven = forgiven + 1
