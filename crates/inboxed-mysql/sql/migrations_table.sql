-- migrations_table: the namespace's record of applied migrations, created on first use. The
-- checksum is the SHA-256 of the migration's template, so it does not depend on the namespace.
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}migrations` (
    version     BIGINT        NOT NULL PRIMARY KEY,
    description VARCHAR(255)  CHARACTER SET utf8mb4 NOT NULL,
    checksum    VARBINARY(32) NOT NULL,
    applied_at  DATETIME(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB
