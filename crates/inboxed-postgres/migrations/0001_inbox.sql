-- 0001: the processed-messages table, the dead-letter table and durable attempt counters.
--
-- Template: {{schema}} is replaced by a validated, quoted schema name and {{prefix}} by a
-- validated table prefix (lowercase letters, digits, '_') when the store is built. Applied by
-- the store's migration runner inside one transaction under an advisory lock.

-- One row per (consumer, message) this service has processed. The row is inserted in the same
-- transaction as the business change, so "recorded" and "applied" commit or vanish together.
CREATE TABLE {{schema}}."{{prefix}}processed_messages" (
    -- Which handler processed it. Leads the key: every lookup names both columns, and leading
    -- with the consumer keeps one consumer's rows together for per-consumer stats, retention
    -- and removal, and lets time-ordered ids append at one edge of the index per consumer.
    consumer_name  text        NOT NULL,
    -- Producer-assigned id or business idempotency key, set once when the event was created.
    -- Never a broker offset, receipt handle or delivery count: those change on redelivery.
    message_id     text        NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    -- Debugging metadata; no part of deduplication.
    message_type   text,
    correlation_id text,
    -- SHA-256 of the raw payload (hash format v1): detects a key reused for another payload.
    payload_hash   bytea,
    PRIMARY KEY (consumer_name, message_id)
);

-- Serves the time-based purge as a range delete instead of a full scan.
CREATE INDEX "{{prefix}}processed_messages_received_at_idx"
    ON {{schema}}."{{prefix}}processed_messages" (received_at);

-- Messages that failed permanently, ran out of attempts, collided with another payload, or
-- had no usable key. Kept apart from processed_messages: "failed" is not "processed".
CREATE TABLE {{schema}}."{{prefix}}dead_letters" (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_name   text        NOT NULL,
    -- NULL when the delivery carried no usable key; NULLs never collide in the unique key.
    message_id      text,
    message_type    text,
    correlation_id  text,
    -- Raw payload, so an operator can retry it after a fix.
    payload         bytea       NOT NULL,
    payload_hash    bytea,
    -- permanent | attempts_exhausted | conflict | invalid_message
    reason          text        NOT NULL,
    -- The error and its whole source chain.
    error           text        NOT NULL,
    attempts        integer     NOT NULL,
    first_failed_at timestamptz NOT NULL DEFAULT now(),
    last_failed_at  timestamptz NOT NULL DEFAULT now(),
    -- Empty, except on conflict rows, where it is the colliding payload's hash: every distinct
    -- payload that collided with a processed key keeps a row of its own, while any other key
    -- has at most one dead letter, which later deliveries never overwrite.
    conflict_hash   bytea       NOT NULL DEFAULT '\x'::bytea,
    UNIQUE (consumer_name, message_id, conflict_hash)
);

-- Attempts per key, counted in their own committed transaction before the handler runs, so a
-- message that kills the process still reaches the dead-letter path after max_attempts. Rows
-- are deleted when the key is processed or dead-lettered.
CREATE TABLE {{schema}}."{{prefix}}attempts" (
    consumer_name    text        NOT NULL,
    message_id       text        NOT NULL,
    attempts         integer     NOT NULL,
    first_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_attempt_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, message_id)
);
