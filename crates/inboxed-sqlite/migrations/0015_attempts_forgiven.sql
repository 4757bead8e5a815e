-- 0015: deliveries that never ran, per key. Same template rules as 0001.
--
-- A delivery whose claim waited for another delivery of the same key (one still holding its
-- uncommitted claim: slow, hung, or on a host cut off from the network until the server ends
-- its session) and gave up at the lock timeout never ran its handler: it is not an attempt of
-- the message. Counted here, and taken off the count: the store's (record_attempt returns
-- attempts - forgiven) and the broker's alike (the processor subtracts it from a redelivery's
-- count), so that waiting out a dead consumer's claim cannot dead-letter a message.
ALTER TABLE {{schema}}."{{prefix}}attempts" ADD COLUMN forgiven INTEGER NOT NULL DEFAULT 0;
