-- register_worker: on a worker's liveness connection (a connection of its own, held for the
-- worker's run), before its first claim. $1 worker id (claimed_by of its rows)
--
-- Takes the session advisory lock first, then writes the row, in one statement: the reaper
-- can never see the registration of a live worker without its lock held. The lock goes when
-- the session ends (the process died, or its connection did), which dead_workers sees. The
-- keys: the table's namespace and a hash of the id, in the two-integer form. It only tries:
-- no row comes back when another session holds the key (the same id running twice, or two
-- ids hashing alike), and the worker then goes unregistered rather than wait. Run again after
-- a reconnect: the registration may have been forgotten meanwhile.
INSERT INTO {{schema}}."{{prefix}}workers" (id, lock_class, lock_key)
SELECT $1, k.class, k.key
FROM (SELECT hashtext('{{schema}}.{{prefix}}workers') AS class, hashtext($1) AS key) k
WHERE pg_try_advisory_lock(k.class, k.key)
ON CONFLICT (id) DO UPDATE SET lock_class = EXCLUDED.lock_class, lock_key = EXCLUDED.lock_key
RETURNING id
