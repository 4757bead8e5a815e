-- migrations_table: the namespace's record of applied migrations, created on first use.
-- The checksum is the SHA-256 of the migration's template, so it does not depend on the
-- namespace.
CREATE TABLE IF NOT EXISTS {{schema}}."{{prefix}}migrations" (
    version bigint PRIMARY KEY,
    description text NOT NULL,
    checksum bytea NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
