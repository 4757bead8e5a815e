-- 0005: the record of the outbox relay's lock-held batches, as the other engines have it after
-- their migration 13 (the reasoning is in the PostgreSQL file). Same template rules as 0001;
-- may run twice.
--
-- A lock-held batch holds its rows by their row locks for the length of its publish, and is
-- recorded here on another connection, committed at once, before the publish; its settling
-- statement deletes the record in the batch's transaction. A record that outlives its batch's
-- transaction (the relay died, or the transaction failed) is judged by the reaper. What tells
-- a live batch from a dead one is a named lock (`GET_LOCK`, `lock_name`) that the batch's
-- connection takes before it locks its rows and keeps until the connection goes back to the
-- pool or closes: MySQL has no lock that ends with a transaction, as PostgreSQL's advisory
-- transaction lock does. InnoDB has no unlogged tables: the record costs a logged commit.
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}outbox_unsettled` (
    token     VARBINARY(16) NOT NULL PRIMARY KEY,
    -- 'inboxed/' and a SHA-1 of the table's namespace and the batch's random key
    lock_name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    relay     TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- the batch's row ids, a JSON array
    ids       LONGTEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL
) ENGINE = InnoDB;
