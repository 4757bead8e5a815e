-- 0002: the store-then-process inbox (see the PostgreSQL migration for the reasoning behind
-- each column). Times here are INTEGER milliseconds since the Unix epoch, so that comparisons
-- with injected clocks and lease arithmetic are plain integer operations.

CREATE TABLE {{schema}}."{{prefix}}inbox_messages" (
    id               INTEGER PRIMARY KEY,
    consumer_name    TEXT    NOT NULL,
    message_id       TEXT    NOT NULL,
    aggregate_id     TEXT,
    message_type     TEXT,
    correlation_id   TEXT,
    payload          BLOB    NOT NULL,
    payload_hash     BLOB    NOT NULL,
    status           TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'processing', 'done', 'dead')),
    received_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    available_at     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    attempts         INTEGER NOT NULL DEFAULT 0,
    claimed_at       INTEGER,
    claimed_by       TEXT,
    lease_expires_at INTEGER,
    claim_token      BLOB,
    last_error       TEXT,
    done_at          INTEGER,
    UNIQUE (consumer_name, message_id)
) STRICT;

CREATE INDEX {{schema}}."{{prefix}}inbox_messages_pending_idx"
    ON "{{prefix}}inbox_messages" (consumer_name, id) WHERE status = 'pending';
CREATE INDEX {{schema}}."{{prefix}}inbox_messages_aggregate_idx"
    ON "{{prefix}}inbox_messages" (consumer_name, aggregate_id, id)
    WHERE status <> 'done' AND aggregate_id IS NOT NULL;
CREATE INDEX {{schema}}."{{prefix}}inbox_messages_lease_idx"
    ON "{{prefix}}inbox_messages" (lease_expires_at) WHERE status = 'processing';
CREATE INDEX {{schema}}."{{prefix}}inbox_messages_done_idx"
    ON "{{prefix}}inbox_messages" (done_at) WHERE status = 'done';

CREATE TABLE {{schema}}."{{prefix}}redrive_audit" (
    id            INTEGER PRIMARY KEY,
    at            INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    actor         TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    consumer_name TEXT    NOT NULL,
    selector      TEXT    NOT NULL,
    row_count     INTEGER NOT NULL,
    done_count    INTEGER NOT NULL,
    -- The ids reset, as a JSON array.
    ids           TEXT    NOT NULL
) STRICT;
