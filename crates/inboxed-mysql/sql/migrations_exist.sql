-- migrations_exist: whether the migrations table is there (a health check asks without
-- creating it). $1 schema (the database), $2 table name
SELECT COUNT(*) > 0 FROM information_schema.tables
WHERE table_schema = $1 AND table_name = $2
