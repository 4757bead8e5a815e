-- forgive: forgives some of a key's attempts, committed on its own (see the PostgreSQL file
-- for what is forgiven and why).
-- $1 consumer_name, $2 message_id, $3 how many (negative takes forgiveness back; never below
-- 0; the column is signed, so the sum may dip below 0 before GREATEST lifts it)
INSERT INTO {{schema}}.`{{prefix}}attempts` (consumer_name, message_id, attempts, forgiven)
VALUES ($1, $2, 0, GREATEST($3, 0))
ON DUPLICATE KEY UPDATE forgiven = GREATEST(forgiven + $3, 0)
