-- 0001: the processed-messages table, the dead-letter table and durable attempt counters.
--
-- Template: {{schema}} is the backquoted database name and {{prefix}} a validated table prefix.
-- Same numbering and meaning as the PostgreSQL migration; see that file for the reasoning
-- behind each column. What differs on MySQL and MariaDB:
-- - Keys are VARBINARY: under the server's default collation `abc`, `AbC` and `AbC ` are one
--   key; bytes compare exactly. The lengths are the envelope's limits (consumer names of 128
--   bytes, ids of 512), so the strict sql_mode the store requires refuses nothing the
--   envelope accepts, and nothing longer can be cut into a false duplicate.
-- - DDL commits on its own here, so a migration cannot be rolled back halfway: each statement
--   may run again after a crash between two of them (IF NOT EXISTS), and migrators take turns
--   on a named lock (migrate_lock.sql).
-- - Timestamps are DATETIME(6) in UTC: the store's connections set time_zone = '+00:00'.
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}processed_messages` (
    consumer_name  VARBINARY(128) NOT NULL,
    message_id     VARBINARY(512) NOT NULL,
    received_at    DATETIME(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    message_type   TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    correlation_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    -- SHA-256 of the raw payload (hash format v1), for conflict detection only.
    payload_hash   VARBINARY(32),
    PRIMARY KEY (consumer_name, message_id),
    -- Serves the time-based purge as a range delete instead of a full scan.
    KEY `{{prefix}}processed_messages_received_at_idx` (received_at)
) ENGINE = InnoDB;

-- Kept apart from processed_messages: "failed" is not "processed".
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}dead_letters` (
    id              BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    consumer_name   VARBINARY(128) NOT NULL,
    -- NULL when the delivery carried no usable key; NULLs never collide in the unique key.
    message_id      VARBINARY(512),
    message_type    TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    correlation_id  TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    payload         LONGBLOB       NOT NULL,
    payload_hash    VARBINARY(32),
    -- permanent | attempts_exhausted | conflict | invalid_message
    reason          VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    error           TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    attempts        INT            NOT NULL,
    first_failed_at DATETIME(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    last_failed_at  DATETIME(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    -- Empty, except on conflict rows: the colliding payload's hash (see the PostgreSQL file).
    conflict_hash   VARBINARY(32)  NOT NULL DEFAULT '',
    UNIQUE KEY `{{prefix}}dead_letters_key` (consumer_name, message_id, conflict_hash)
) ENGINE = InnoDB;

-- Attempts per key, counted in their own committed transaction before the handler runs.
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}attempts` (
    consumer_name    VARBINARY(128) NOT NULL,
    message_id       VARBINARY(512) NOT NULL,
    attempts         INT            NOT NULL,
    first_attempt_at DATETIME(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    last_attempt_at  DATETIME(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (consumer_name, message_id)
) ENGINE = InnoDB;
