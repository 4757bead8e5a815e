-- 0003: indexes the claims can rely on. Same template rules as 0001.

-- The claim takes pending rows in order of availability (arrival for fresh rows, the end of
-- the backoff for retried ones), as on PostgreSQL, where ordering on a column the primary key
-- does not have keeps a planner with stale statistics from walking done rows.
CREATE INDEX {{schema}}."{{prefix}}inbox_messages_claim_idx"
    ON "{{prefix}}inbox_messages" (consumer_name, available_at, id) WHERE status = 'pending';
DROP INDEX {{schema}}."{{prefix}}inbox_messages_pending_idx";

-- The heartbeat's lease extension and the hand-back at shutdown or isolation find a batch's
-- rows by claim token; without this each scanned the whole table. Partial: only rows being
-- processed carry a token.
CREATE INDEX {{schema}}."{{prefix}}inbox_messages_claim_token_idx"
    ON "{{prefix}}inbox_messages" (claim_token) WHERE status = 'processing';
