-- dead_workers: the reaper's liveness probe. Registered workers whose session lock is free:
-- their session ended, so their process (or its connection) is gone. No parameters.
--
-- pg_try_advisory_xact_lock holds a free lock only until this statement's transaction ends
-- (autocommit: at once), so the probe never keeps a worker's key; a worker registering again
-- at that moment waits for it that long.
SELECT id FROM {{schema}}."{{prefix}}workers" WHERE pg_try_advisory_xact_lock(lock_class, lock_key)
