-- register_worker: on a worker's liveness connection (a connection of its own, held for the
-- worker's run), before its first claim. $1 worker id (claimed_by of its rows)
--
-- Takes the session advisory lock first, then writes the row, in one statement: the reaper
-- can never see the registration of a live worker without its lock held. The lock goes when
-- the session ends (the process died, or its connection did), which dead_workers sees. The
-- key is a hash of the id within this table's namespace; two ids hashing alike only make one
-- look alive while the other lives, and its rows then wait for their lease. Run again after a
-- reconnect: the registration may have been forgotten meanwhile.
INSERT INTO {{schema}}."{{prefix}}workers" (id, lock_key)
SELECT $1, k.key
FROM (SELECT hashtextextended('{{schema}}.{{prefix}}workers ' || $1, 0) AS key) k,
     LATERAL (SELECT pg_advisory_lock(k.key)) locked
ON CONFLICT (id) DO NOTHING
