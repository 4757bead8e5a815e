-- outbox_hold: records a lock-held batch before its publish, on a connection of its own and
-- committed at once, so that the record survives the batch's transaction if its relay dies.
-- $1 claim token, $2 the batch's lock key (its named lock, taken by outbox_lock.sql on the
-- batch's connection before this runs), $3 relay id, $4 row ids (a JSON array)
INSERT INTO {{schema}}.`{{prefix}}outbox_unmarked` (token, lock_name, relay, ids)
VALUES ($1, CONCAT('inboxed/', SHA1(CONCAT('{{schema}}.{{prefix}}outbox_unmarked/', $2))),
        $3, $4)
