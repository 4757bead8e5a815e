-- outbox_lock_plan: run in a relay's claim transaction (a lock-held batch's, before
-- outbox_lock; a lease's, before outbox_claim), so that its claim reads the pending index in id
-- order and stops at the limit, whatever the statistics say. No parameters.
--
-- Statistics of a queue table are stale by nature (a burst arrives after a quiet spell, or
-- after the last ANALYZE saw an empty table): estimating a handful of pending rows, the
-- planner reads all of them through a bitmap and sorts them, on every claim. Measured on
-- 20,000 fresh rows with no statistics: 21 ms a claim of 500 that way, 0.4 ms through the
-- index. SET LOCAL ends with the transaction, which after the claim only marks its rows by id.
SET LOCAL enable_sort = off
