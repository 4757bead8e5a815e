-- 0001: the processed-messages table, the dead-letter table and durable attempt counters.
--
-- Template: {{schema}} is replaced by a validated, quoted schema name and {{prefix}} by a
-- validated table prefix (lowercase letters, digits, '_') when the store is built. Applied by
-- the store's migration runner inside one transaction under an advisory lock.

-- Consumers by name, each with the compact id that the processed keys store instead of the
-- name (4 bytes against a name's 10 to 60 a row, in the table and again in its key index).
-- Written once per consumer, before its first claim, in its own statement (register_consumer);
-- never in the handler's transaction, where a first claim would hold the new row's lock until
-- its business change commits.
CREATE TABLE {{schema}}."{{prefix}}consumers" (
    id            integer     GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL UNIQUE,
    registered_at timestamptz NOT NULL DEFAULT now()
);

-- A registered consumer is never renamed or removed: its keys store only its id, so a deleted
-- row would give the name a new id at its next registration, and every key processed before
-- would look new (and stay unreachable to the purge). Refused here rather than trusted to care.
CREATE FUNCTION {{schema}}."{{prefix}}consumers_are_permanent"() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION 'inboxed consumers are permanent: their processed keys store the id'
        USING ERRCODE = 'restrict_violation';
END
$fn$;
CREATE TRIGGER "{{prefix}}consumers_are_permanent"
    BEFORE UPDATE OR DELETE ON {{schema}}."{{prefix}}consumers"
    FOR EACH ROW EXECUTE FUNCTION {{schema}}."{{prefix}}consumers_are_permanent"();
CREATE TRIGGER "{{prefix}}consumers_are_not_truncated"
    BEFORE TRUNCATE ON {{schema}}."{{prefix}}consumers"
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}."{{prefix}}consumers_are_permanent"();

-- The stored form of a message id in the processed keys (docs/key-format.md, "Stored form"). The
-- canonical UUID text (lowercase, hyphenated) becomes its 16 bytes; any other id its UTF-8
-- bytes, with a 0xFF byte appended when they are 16 bytes long. The encoding is injective, so
-- the unique key on it is exactly the unique key on the text: 16 bytes is always a UUID, and a
-- text of 16 bytes becomes 17 bytes ending in 0xFF, a byte that UTF-8 never contains. An
-- uppercase or unhyphenated UUID is another id (ids are compared as text) and stays text.
CREATE FUNCTION {{schema}}."{{prefix}}message_key"(message_id text) RETURNS bytea
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN CASE
    WHEN message_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
        THEN decode(translate(message_id, '-', ''), 'hex')
    WHEN octet_length(convert_to(message_id, 'UTF8')) = 16
        THEN convert_to(message_id, 'UTF8') || '\xff'::bytea
    ELSE convert_to(message_id, 'UTF8')
END;

-- The inverse of message_key, for operators and tests reading keys back.
CREATE FUNCTION {{schema}}."{{prefix}}message_id"(message_key bytea) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN CASE
    WHEN octet_length(message_key) = 16
        THEN encode(message_key, 'hex')::uuid::text
    WHEN octet_length(message_key) = 17 AND get_byte(message_key, 16) = 255
        THEN convert_from(substring(message_key FROM 1 FOR 16), 'UTF8')
    ELSE convert_from(message_key, 'UTF8')
END;

-- One row per (consumer, message) this service has processed. The row is inserted in the same
-- transaction as the business change, so "recorded" and "applied" commit or vanish together.
-- Compact, because at thousands of messages a second it holds hundreds of millions of rows:
-- columns ordered so that none is padded, 29 bytes of data, a 56-byte tuple with its header.
-- Message type and correlation id are not kept here (the dead letters and the tracing span
-- carry them); they would cost more than the key.
CREATE TABLE {{schema}}."{{prefix}}processed_messages" (
    -- Which handler processed it (consumers.id). Leads the key: every lookup names both
    -- columns, and leading with the consumer keeps one consumer's rows together for
    -- per-consumer stats, retention and removal.
    consumer_id  integer NOT NULL,
    -- Seconds since 2020-01-01 UTC (until 2088): what the retention window is measured on.
    -- Rounded down, so a purge by "received before" never takes a key younger than its cut-off.
    received_s   integer NOT NULL
        DEFAULT (floor(extract(epoch FROM now())) - 1577836800)::integer,
    -- The first 4 bytes of the payload's SHA-256 (hash format v1), as a signed big-endian
    -- integer: detects a key reused for another payload, missing one such reuse in 2^32.
    fingerprint  integer,
    -- message_key(producer-assigned id): never a broker offset, receipt handle or delivery
    -- count, which change on redelivery.
    message_key  bytea   NOT NULL,
    PRIMARY KEY (consumer_id, message_key) WITH (fillfactor = 100)
);

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
