-- 0006: the time-partitioned dedup table (`MySqlStore::partitioned`), as the other engines
-- have it after their migration 5: the columns of processed_messages, partitioned so that
-- expiry drops a partition instead of deleting rows. It stays empty unless partitioned mode is
-- used. Same template rules as 0001; may run twice.
--
-- MySQL requires every unique key of a partitioned table to hold the partition column, so a
-- partition by received time could not keep a unique key on (consumer_name, message_id): a key
-- received on Monday and again on Tuesday would land in two partitions. This table is
-- partitioned instead by `id_ms`, the time in a UUIDv7 message id (its first 48 bits, in
-- milliseconds since the Unix epoch), 0 for an id without one: a function of the id, so one key
-- always lands in one partition and the primary key stays a global dedup key. The CHECK makes
-- the server refuse a row whose id_ms is not that function of its id (MySQL enforces CHECK from
-- 8.0.16, MariaDB from 10.2; claim_partitioned.sql computes it with the same expression).
-- A generated column cannot stand in: MariaDB refuses a primary key on one (1903) and a
-- partition by one computed this way (1486).
--
-- Partitions are named `p` and their upper bound: p1 holds the ids without a time (never
-- dropped by time), pMAX the ids past the last partition created; maintenance carves new
-- partitions out of pMAX (REORGANIZE) and drops expired ones (partitions.rs).
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}processed_log` (
    consumer_name  VARBINARY(128) NOT NULL,
    message_id     VARBINARY(512) NOT NULL,
    id_ms          BIGINT         NOT NULL,
    received_at    DATETIME(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    message_type   TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    correlation_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    payload_hash   VARBINARY(32),
    PRIMARY KEY (consumer_name, message_id, id_ms),
    -- A partition's newest receipt, for the expiry check.
    KEY `{{prefix}}processed_log_received_at_idx` (received_at),
    CONSTRAINT `{{prefix}}processed_log_id_ms` CHECK (id_ms = CASE
        WHEN LENGTH(message_id) = 36
         AND SUBSTR(message_id, 9, 1) = '-' AND SUBSTR(message_id, 14, 1) = '-'
         AND SUBSTR(message_id, 15, 1) = '7' AND SUBSTR(message_id, 19, 1) = '-'
         AND SUBSTR(message_id, 24, 1) = '-'
         AND LENGTH(REPLACE(message_id, '-', '')) = 32
         AND UNHEX(REPLACE(message_id, '-', '')) IS NOT NULL
        THEN CONV(CONCAT(SUBSTR(message_id, 1, 8), SUBSTR(message_id, 10, 4)), 16, 10)
        ELSE 0 END)
) ENGINE = InnoDB
PARTITION BY RANGE (id_ms) (
    PARTITION p1 VALUES LESS THAN (1),
    PARTITION pMAX VALUES LESS THAN MAXVALUE
);
