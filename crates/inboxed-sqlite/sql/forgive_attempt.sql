-- forgive_attempt: counts a delivery of a key that never ran, committed on its own (see the
-- PostgreSQL file): its claim waited for the write lock or another delivery's claim and gave
-- up at the busy timeout.
-- ?1 consumer_name, ?2 message_id, ?3 how many (1, or -1 to take one back; never below 0)
INSERT INTO {{schema}}."{{prefix}}attempts" (consumer_name, message_id, attempts, forgiven)
VALUES (?1, ?2, 0, max(?3, 0))
ON CONFLICT (consumer_name, message_id)
DO UPDATE SET forgiven = max(forgiven + ?3, 0)
