-- migrations_exist: whether the migrations table is there (a health check asks without
-- creating it). ?1 schema (unused: the statement reads the namespace's own schema),
-- ?2 table name
SELECT count(*) > 0 FROM {{schema}}.sqlite_master WHERE type = 'table' AND name = ?2
