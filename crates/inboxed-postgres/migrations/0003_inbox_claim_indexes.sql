-- 0003: indexes the claims can rely on whatever the planner's statistics say. Same template
-- rules as 0001.

-- The claim takes pending rows in order of availability (arrival for fresh rows, the end of
-- the backoff for retried ones). Ordering on available_at is something the primary key cannot
-- provide, so the planner cannot trade this index for a walk of the primary key filtered on
-- status: with statistics analyzed while a backlog was all pending (a queue table churns faster
-- than autovacuum analyzes it), the (consumer_name, id) index lost to exactly that walk, and
-- every claim read through all done rows (measured: about 4,000 rows read per claim after 8 s at
-- 1,000 msg/s).
CREATE INDEX "{{prefix}}inbox_messages_claim_idx"
    ON {{schema}}."{{prefix}}inbox_messages" (consumer_name, available_at, id)
    WHERE status = 'pending';
DROP INDEX {{schema}}."{{prefix}}inbox_messages_pending_idx";

-- The heartbeat's lease extension and the hand-back at shutdown or isolation find a batch's
-- rows by claim token. Without this each of them scanned the whole table, done rows included.
-- Partial: only rows being processed carry a token, so it stays as small as the batches in
-- flight.
CREATE INDEX "{{prefix}}inbox_messages_claim_token_idx"
    ON {{schema}}."{{prefix}}inbox_messages" (claim_token) WHERE status = 'processing';
