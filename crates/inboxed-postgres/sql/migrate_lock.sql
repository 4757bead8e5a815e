-- migrate_lock: serialises migrators of one namespace across processes, until the migrating
-- transaction ends. $1 schema, $2 prefix (the key is the same text every version has used,
-- so that migrators of two versions in a rolling deploy still take turns).
SELECT pg_advisory_xact_lock(hashtextextended('inboxed:migrate:' || $1 || ':' || $2, 0))
