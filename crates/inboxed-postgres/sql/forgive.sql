-- forgive: forgives some of a key's attempts, committed on its own; record_attempt counts
-- attempts net of what is forgiven.
-- $1 consumer_name, $2 message_id, $3 how many (negative takes forgiveness back; the total
-- never goes below 0)
--
-- Forgiven: a delivery that never ran (its claim waited for another delivery's uncommitted
-- claim and gave up at the lock timeout: waiting out a consumer cut off mid-transaction must
-- not use up a message's attempts), and a suspect while it waits for its turn alone in its
-- crash-attribution scope (a crash meanwhile is not its doing), taken back (-1) when the turn
-- comes. An upsert: a first delivery counted by the broker has no counter yet.
INSERT INTO {{schema}}."{{prefix}}attempts" AS a (consumer_name, message_id, attempts, forgiven)
VALUES ($1, $2, 0, GREATEST($3, 0))
ON CONFLICT (consumer_name, message_id)
DO UPDATE SET forgiven = GREATEST(a.forgiven + $3, 0)
