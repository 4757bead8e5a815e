-- 0012: what an operator does with the outbox (docs/outbox.md, "Operating it"). Same template
-- rules as 0001.
--
-- The audit record of the inbox's replays also keeps the outbox's retries and discards, so
-- one table answers "who touched what": `action` says which (existing rows are replays and
-- re-drives), and an outbox action, which no consumer owns, has an empty consumer_name.
ALTER TABLE {{schema}}."{{prefix}}redrive_audit"
    ADD COLUMN action text NOT NULL DEFAULT 'replay';

-- Serves the list of dead rows, their count for the operator's gauges, and the selection of a
-- retry or discard, however many rows were sent.
CREATE INDEX "{{prefix}}outbox_messages_dead_idx"
    ON {{schema}}."{{prefix}}outbox_messages" (id) WHERE status = 'dead';
