-- forget_workers: removes registrations: the reaper's, once it has returned a dead worker's
-- rows, and a worker's own when it stops cleanly, on its liveness connection. $1 worker ids
-- (text[])
--
-- Only where the lock can be taken: it is free (the worker is dead), or held by this very
-- session (advisory locks are re-entrant within a session: the worker stopping). A dead-looking
-- worker whose connection came back and registered again holds its lock from another session,
-- and keeps its registration.
DELETE FROM {{schema}}."{{prefix}}workers"
WHERE id = ANY($1) AND pg_try_advisory_xact_lock(lock_class, lock_key)
