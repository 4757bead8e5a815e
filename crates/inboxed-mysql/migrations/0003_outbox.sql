-- 0003: the transactional outbox, as the other engines have it after their migrations 11 to
-- 13 (the reasoning behind each column is in the PostgreSQL files). Same template rules as
-- 0001; times are BIGINT milliseconds since the Unix epoch, as in 0002. What differs on MySQL
-- and MariaDB:
-- - No partial indexes: each index leads with the status, or holds every row.
-- - Ids and ordering keys are bytes (VARBINARY), compared exactly, as the inbox's keys.
-- - The relay holds its rows under a lease only (no record of lock-held batches yet).
-- MySQL commits each DDL statement on its own, so a migration cut short is applied again
-- from its start: every statement here may run twice. MySQL has no `ADD COLUMN IF NOT
-- EXISTS` (MariaDB has): the column is added by a prepared statement only when
-- information_schema does not list it. The schema compares in its rendered, quoted form.
SET @inboxed_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE {{schema}}.`{{prefix}}redrive_audit`
                   ADD COLUMN action VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin
                   NOT NULL DEFAULT ''replay''',
              'DO 0')
    FROM information_schema.columns
    WHERE CONCAT('`', table_schema, '`') = '{{schema}}'
      AND table_name = '{{prefix}}redrive_audit'
      AND column_name = 'action'
);
PREPARE inboxed_ddl FROM @inboxed_ddl;
EXECUTE inboxed_ddl;
DEALLOCATE PREPARE inboxed_ddl;

CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}outbox_messages` (
    id                   BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    message_id           VARBINARY(512) NOT NULL,
    destination          TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    ordering_key         VARBINARY(512),
    message_type         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    correlation_id       TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    -- A JSON object of strings, as text.
    headers              LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    payload              LONGBLOB       NOT NULL,
    caused_by_consumer   VARBINARY(128),
    caused_by_message_id VARBINARY(512),
    status               VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
                         DEFAULT 'pending'
                         CHECK (status IN ('pending', 'sending', 'sent', 'dead')),
    created_at           BIGINT         NOT NULL,
    available_at         BIGINT         NOT NULL,
    attempts             INT            NOT NULL DEFAULT 0,
    claimed_by           TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    lease_expires_at     BIGINT,
    claim_token          VARBINARY(64),
    last_error           TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    sent_at              BIGINT,
    group_limit          INT,
    UNIQUE KEY `{{prefix}}outbox_messages_message_id` (message_id),
    -- The claim: unsent rows in insert order.
    KEY `{{prefix}}outbox_messages_claim_idx` (status, id),
    -- The ordering-key check for an earlier unsent row of the same key. It holds sent rows
    -- too (no partial index): the check reads a key's kept history back from the row.
    KEY `{{prefix}}outbox_messages_key_idx` (ordering_key, id),
    -- The reaper, and the purge of sent rows by age.
    KEY `{{prefix}}outbox_messages_lease_idx` (status, lease_expires_at),
    KEY `{{prefix}}outbox_messages_sent_idx` (status, sent_at),
    -- A batch's rows by claim token: sent, delete, release.
    KEY `{{prefix}}outbox_messages_claim_token_idx` (claim_token)
) ENGINE = InnoDB;

-- The outbox's reaper takes turns with other outbox reapers, not with the inbox's (as on
-- PostgreSQL, whose reapers hold two different locks).
INSERT INTO {{schema}}.`{{prefix}}locks` (name) VALUES ('outbox_reaper')
ON DUPLICATE KEY UPDATE name = name;
