-- migrate_unlock: the end of a migration run. $1 schema, $2 prefix
--
-- Commits the last migration's record first, then releases migrate_lock.sql's named lock, so
-- that the next migrator finds every migration of this run recorded. (The runner's own COMMIT
-- after this finds nothing left to commit.)
COMMIT;
SELECT RELEASE_LOCK(CONCAT('inboxed.migrate.', $1, '.', $2))
