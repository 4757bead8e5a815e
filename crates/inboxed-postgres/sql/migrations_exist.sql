-- migrations_exist: whether the migrations table is there (a health check asks without
-- creating it). $1 schema, $2 table name, both unquoted
SELECT to_regclass(format('%I.%I', $1::text, $2::text)) IS NOT NULL
