-- 0012: what an operator does with the outbox (see the PostgreSQL migration): the audit
-- record's action, and an index of dead rows.
ALTER TABLE {{schema}}."{{prefix}}redrive_audit"
    ADD COLUMN action TEXT NOT NULL DEFAULT 'replay';

CREATE INDEX {{schema}}."{{prefix}}outbox_messages_dead_idx"
    ON "{{prefix}}outbox_messages" (id) WHERE status = 'dead';
