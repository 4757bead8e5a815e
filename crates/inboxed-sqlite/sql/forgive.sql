-- forgive: forgives some of a key's attempts, committed on its own (see the PostgreSQL file
-- for what is forgiven and why).
-- ?1 consumer_name, ?2 message_id, ?3 how many (negative takes forgiveness back; the total
-- never goes below 0)
INSERT INTO {{schema}}."{{prefix}}attempts" (consumer_name, message_id, attempts, forgiven)
VALUES (?1, ?2, 0, max(?3, 0))
ON CONFLICT (consumer_name, message_id)
DO UPDATE SET forgiven = max(forgiven + ?3, 0)
