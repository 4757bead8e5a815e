-- dead_workers: the reaper's liveness probe. Registered workers whose named lock is free:
-- their session ended, so their process (or its connection) is gone. No parameters.
--
-- IS_FREE_LOCK only reads: the probe never holds a worker's lock, so a worker registering
-- again at that moment never waits on it.
SELECT id FROM {{schema}}.`{{prefix}}workers` WHERE IS_FREE_LOCK(lock_name) = 1
