-- 0011: the transactional outbox (see the PostgreSQL migration for the reasoning behind each
-- column). Times are INTEGER milliseconds since the Unix epoch; headers a JSON object as text.
CREATE TABLE {{schema}}."{{prefix}}outbox_messages" (
    id                   INTEGER PRIMARY KEY,
    message_id           TEXT    NOT NULL UNIQUE,
    destination          TEXT    NOT NULL,
    ordering_key         TEXT,
    message_type         TEXT,
    correlation_id       TEXT,
    headers              TEXT    NOT NULL DEFAULT '{}',
    payload              BLOB    NOT NULL,
    caused_by_consumer   TEXT,
    caused_by_message_id TEXT,
    status               TEXT    NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'sending', 'sent', 'dead')),
    created_at           INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    available_at         INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    attempts             INTEGER NOT NULL DEFAULT 0,
    claimed_by           TEXT,
    lease_expires_at     INTEGER,
    claim_token          BLOB,
    last_error           TEXT,
    sent_at              INTEGER
) STRICT;

CREATE INDEX {{schema}}."{{prefix}}outbox_messages_pending_idx"
    ON "{{prefix}}outbox_messages" (id) WHERE status = 'pending';
CREATE INDEX {{schema}}."{{prefix}}outbox_messages_key_idx"
    ON "{{prefix}}outbox_messages" (ordering_key, id)
    WHERE status <> 'sent' AND ordering_key IS NOT NULL;
CREATE INDEX {{schema}}."{{prefix}}outbox_messages_lease_idx"
    ON "{{prefix}}outbox_messages" (lease_expires_at) WHERE status = 'sending';
CREATE INDEX {{schema}}."{{prefix}}outbox_messages_sent_idx"
    ON "{{prefix}}outbox_messages" (sent_at) WHERE status = 'sent';
