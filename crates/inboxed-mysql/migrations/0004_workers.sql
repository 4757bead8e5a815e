-- 0004: the worker registry, as the other engines have it after their migration 10. Same
-- template rules as 0001; may run twice (MySQL commits each DDL statement on its own).
--
-- A worker holds a named lock (GET_LOCK) on a connection of its own for as long as it runs;
-- a registered worker whose lock is free has died (its connection closed with its process),
-- so the reaper returns its rows at its next pass instead of after their lease. A worker that
-- is not registered (one in another language, a run_once loop) is judged by its leases alone.
-- Named locks are the server's, not the database's: the name is a hash of this table's
-- namespace and the worker's id (register_worker.sql), at most 64 characters as MySQL wants.
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}workers` (
    -- claimed_by of the rows it claims, compared exactly
    id         VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    lock_name  VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- milliseconds since the Unix epoch
    started_at BIGINT NOT NULL
) ENGINE = InnoDB;
