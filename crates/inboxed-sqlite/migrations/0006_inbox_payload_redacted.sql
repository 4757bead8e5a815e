-- 0006: marks done store-then-process rows whose payload the purger emptied, so that a re-drive
-- leaves them out and each redaction batch skips rows emptied before (see the PostgreSQL
-- migration). Same template rules as 0001.
ALTER TABLE {{schema}}."{{prefix}}inbox_messages"
    ADD COLUMN payload_redacted INTEGER NOT NULL DEFAULT 0;
CREATE INDEX {{schema}}."{{prefix}}inbox_messages_redact_idx"
    ON "{{prefix}}inbox_messages" (done_at) WHERE status = 'done' AND payload_redacted = 0;
