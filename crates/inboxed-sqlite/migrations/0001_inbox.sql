-- 0001: the processed-messages table, the dead-letter table and durable attempt counters.
--
-- Template: {{schema}} is the quoted database name ("main" unless attached elsewhere) and
-- {{prefix}} a validated table prefix. Same numbering and meaning as the PostgreSQL migration;
-- see that file for the reasoning behind each column. STRICT tables make SQLite refuse values
-- of the wrong type instead of storing them.
-- Timestamps are ISO 8601 UTC text with milliseconds, which sorts in time order.

CREATE TABLE {{schema}}."{{prefix}}processed_messages" (
    -- Leads the key: every lookup names both columns, and one consumer's rows stay together.
    consumer_name  TEXT NOT NULL,
    -- Producer-assigned id; never a broker offset, receipt handle or delivery count.
    message_id     TEXT NOT NULL,
    received_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    message_type   TEXT,
    correlation_id TEXT,
    -- SHA-256 of the raw payload (hash format v1), for conflict detection only.
    payload_hash   BLOB,
    PRIMARY KEY (consumer_name, message_id)
) STRICT, WITHOUT ROWID;

-- Serves the time-based purge as a range delete instead of a full scan.
CREATE INDEX {{schema}}."{{prefix}}processed_messages_received_at_idx"
    ON "{{prefix}}processed_messages" (received_at);

-- Kept apart from processed_messages: "failed" is not "processed".
CREATE TABLE {{schema}}."{{prefix}}dead_letters" (
    id              INTEGER PRIMARY KEY,
    consumer_name   TEXT    NOT NULL,
    -- NULL when the delivery carried no usable key; NULLs never collide in the unique key.
    message_id      TEXT,
    message_type    TEXT,
    correlation_id  TEXT,
    payload         BLOB    NOT NULL,
    payload_hash    BLOB,
    -- permanent | attempts_exhausted | conflict | invalid_message
    reason          TEXT    NOT NULL,
    error           TEXT    NOT NULL,
    attempts        INTEGER NOT NULL,
    first_failed_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_failed_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    -- Empty, except on conflict rows: the colliding payload's hash (see the PostgreSQL file).
    conflict_hash   BLOB    NOT NULL DEFAULT x'',
    UNIQUE (consumer_name, message_id, conflict_hash)
) STRICT;

-- Attempts per key, counted in their own committed transaction before the handler runs.
CREATE TABLE {{schema}}."{{prefix}}attempts" (
    consumer_name    TEXT    NOT NULL,
    message_id       TEXT    NOT NULL,
    attempts         INTEGER NOT NULL,
    first_attempt_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_attempt_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (consumer_name, message_id)
) STRICT, WITHOUT ROWID;
