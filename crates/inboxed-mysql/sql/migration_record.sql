-- migration_record: one migration applied. $1 version, $2 description, $3 checksum
--
-- MySQL commits each DDL statement on its own, so this record commits with the next
-- migration's first statement, or with the runner's final COMMIT: a crash in between leaves a
-- migration applied and not recorded, which the next run applies again (its statements are
-- written to allow that).
INSERT INTO {{schema}}.`{{prefix}}migrations` (version, description, checksum)
VALUES ($1, $2, $3)
