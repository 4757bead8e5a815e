-- create_schema: the namespace's schema, run only when schema_exists said it is missing:
-- CREATE SCHEMA needs the CREATE privilege on the database even with IF NOT EXISTS, which
-- the owner of an existing schema may lack. IF NOT EXISTS covers a concurrent creator of
-- another namespace in the same schema.
CREATE SCHEMA IF NOT EXISTS {{schema}}
