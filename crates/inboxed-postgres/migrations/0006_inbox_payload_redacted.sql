-- 0006: marks done store-then-process rows whose payload the purger emptied
-- (redact_done_payloads). Same template rules as 0001.
--
-- An empty payload alone cannot tell a redacted row from a message that was empty, and a
-- re-drive of a redacted row would run its handler on nothing: replay_select leaves marked
-- rows out. The partial index lets each redaction batch start at the oldest row still
-- carrying a payload, instead of rescanning every row emptied before.
ALTER TABLE {{schema}}."{{prefix}}inbox_messages"
    ADD COLUMN payload_redacted boolean NOT NULL DEFAULT false;
CREATE INDEX "{{prefix}}inbox_messages_redact_idx"
    ON {{schema}}."{{prefix}}inbox_messages" (done_at)
    WHERE status = 'done' AND NOT payload_redacted;
