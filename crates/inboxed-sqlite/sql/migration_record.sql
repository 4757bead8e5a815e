-- migration_record: one migration applied, in the same transaction as its statements.
-- ?1 version, ?2 description, ?3 checksum
INSERT INTO {{schema}}."{{prefix}}migrations" (version, description, checksum)
VALUES (?1, ?2, ?3)
