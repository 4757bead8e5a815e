-- 0008: serves the operator's count of dead store-then-process rows (observe_inbox.sql), which
-- would otherwise read every done row to find the few dead ones. Partial, so it holds only
-- those. Same template rules as 0001.
CREATE INDEX "{{prefix}}inbox_messages_dead_idx"
    ON {{schema}}."{{prefix}}inbox_messages" (consumer_name) WHERE status = 'dead';
