-- migrations_table: the namespace's record of applied migrations, created on first use.
-- The checksum is the SHA-256 of the migration's template, so it does not depend on the
-- namespace. Migrators take turns on SQLite's one write lock (the runner's BEGIN IMMEDIATE).
CREATE TABLE IF NOT EXISTS {{schema}}."{{prefix}}migrations" (
    version INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    checksum BLOB NOT NULL,
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT
