-- 0002: the store-then-process inbox, as the other engines have it after their migrations 2,
-- 3, 6 and 10 (a new engine starts from their result; the reasoning behind each column is in
-- the PostgreSQL files). Same template rules as 0001. What differs on MySQL and MariaDB:
-- - Times are BIGINT milliseconds since the Unix epoch, as on SQLite: lease arithmetic and the
--   injected clocks of the tests are integer operations, and no time zone enters.
-- - InnoDB has no partial indexes: the claim's index leads with the status instead.
-- - The reaper runs one at a time by locking the row 'reaper' of the locks table (a lock that
--   ends with its transaction, unlike GET_LOCK's, which a failed statement could leave on a
--   pooled connection for good).
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}inbox_messages` (
    id               BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    consumer_name    VARBINARY(128) NOT NULL,
    message_id       VARBINARY(512) NOT NULL,
    aggregate_id     VARBINARY(512),
    message_type     TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    correlation_id   TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    payload          LONGBLOB       NOT NULL,
    payload_hash     VARBINARY(32)  NOT NULL,
    status           VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'processing', 'done', 'dead')),
    received_at      BIGINT         NOT NULL,
    available_at     BIGINT         NOT NULL,
    attempts         INT            NOT NULL DEFAULT 0,
    claimed_at       BIGINT,
    claimed_by       TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    lease_expires_at BIGINT,
    claim_token      VARBINARY(64),
    last_error       TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    done_at          BIGINT,
    payload_redacted BOOLEAN        NOT NULL DEFAULT FALSE,
    group_limit      INT,
    UNIQUE KEY `{{prefix}}inbox_messages_key` (consumer_name, message_id),
    -- The claim: a consumer's pending rows in order of availability.
    KEY `{{prefix}}inbox_messages_claim_idx` (consumer_name, status, available_at, id),
    -- The ordered-mode check for an earlier unfinished row of the same aggregate.
    KEY `{{prefix}}inbox_messages_aggregate_idx` (consumer_name, aggregate_id, id),
    -- The reaper.
    KEY `{{prefix}}inbox_messages_lease_idx` (status, lease_expires_at),
    -- The purge and the redaction of done rows by age.
    KEY `{{prefix}}inbox_messages_done_idx` (status, done_at),
    -- A batch's rows by claim token: completion, heartbeat, release.
    KEY `{{prefix}}inbox_messages_claim_token_idx` (claim_token)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}redrive_audit` (
    id            BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at            BIGINT         NOT NULL,
    actor         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    reason        TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    consumer_name VARBINARY(128) NOT NULL,
    selector      TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    row_count     BIGINT         NOT NULL,
    done_count    BIGINT         NOT NULL,
    -- The ids reset, as a JSON array.
    ids           LONGTEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}locks` (
    name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY
) ENGINE = InnoDB;

INSERT INTO {{schema}}.`{{prefix}}locks` (name) VALUES ('reaper')
ON DUPLICATE KEY UPDATE name = name;
