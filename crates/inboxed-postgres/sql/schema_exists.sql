-- schema_exists: whether the namespace's schema is there already, before create_schema.
-- $1 schema (unquoted)
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)
