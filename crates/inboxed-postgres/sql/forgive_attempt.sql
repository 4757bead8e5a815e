-- forgive_attempt: counts a delivery of a key that never ran, committed on its own: its claim
-- waited for another delivery's uncommitted claim of the key and gave up at the lock timeout.
-- Taken off the key's attempts (record_attempt, and the processor from a broker's count), so
-- that waiting out a consumer cut off mid-transaction cannot use up a message's attempts.
-- The processor also forgives a delivery tried before while it waits for its turn to run
-- alone in its process (a crash meanwhile is not its doing), and takes that back (-1) when the
-- turn comes: from then on a crash is charged to it.
-- $1 consumer_name, $2 message_id, $3 how many (1, or -1 to take one back; never below 0)
--
-- An upsert: under a broker's delivery count the key has no counter yet.
INSERT INTO {{schema}}."{{prefix}}attempts" AS a (consumer_name, message_id, attempts, forgiven)
VALUES ($1, $2, 0, GREATEST($3, 0))
ON CONFLICT (consumer_name, message_id)
DO UPDATE SET forgiven = GREATEST(a.forgiven + $3, 0)
