-- outbox_hold: records a lock-held batch before its publish, on a connection of its own and
-- committed at once, so that the record survives the batch's transaction if its relay dies.
-- $1 claim token, $2 the batch's lock key (held by its transaction), $3 relay id, $4 row ids
--
-- The table is UNLOGGED (migration 0013): this commit waits for no WAL flush.
INSERT INTO {{schema}}."{{prefix}}outbox_unmarked" (token, lock_key, relay, ids)
VALUES ($1, $2, $3, $4)
