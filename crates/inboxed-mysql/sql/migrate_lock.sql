-- migrate_lock: migrators of one namespace take turns. $1 schema, $2 prefix
--
-- A named lock, not a row lock: MySQL's DDL commits on its own and would release a row lock
-- after the first statement. A named lock belongs to the session: migrate_unlock.sql releases
-- it once the migrations are committed, and the server releases it if the migrator's
-- connection dies. Waits as long as another migrator works, as PostgreSQL's advisory lock does
-- (a year: MariaDB refuses a negative, "forever", timeout).
SELECT GET_LOCK(CONCAT('inboxed.migrate.', $1, '.', $2), 31536000)
