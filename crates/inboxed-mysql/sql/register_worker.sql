-- register_worker: on a worker's liveness connection (a connection of its own, held for the
-- worker's run), before its first claim. Returns the worker's row when it is registered,
-- nothing when another session holds its lock. $1 worker id (claimed_by of its rows)
--
-- The lock first, then the row: the reaper can never see the registration of a live worker
-- without its lock held. GET_LOCK with a timeout of 0 only tries: the same id running twice
-- goes unregistered rather than wait. The lock goes when the session ends (the process died,
-- or its connection did), which dead_workers.sql sees; the session's idle timeout is cut to a
-- minute (the worker checks it every second), so that a connection lost without a word (a
-- partition) frees the lock within a minute rather than the server's default eight hours.
-- Run again after a reconnect: the registration may have been forgotten meanwhile. A row left
-- by an earlier run of the id is taken over: its lock name is the same.
SET SESSION wait_timeout = 60;
SET @inboxed_lock = CONCAT('inboxed/', SHA1(CONCAT('{{schema}}.{{prefix}}workers/', $1)));
SET @inboxed_held = GET_LOCK(@inboxed_lock, 0);
INSERT INTO {{schema}}.`{{prefix}}workers` (id, lock_name, started_at)
SELECT $1, @inboxed_lock, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)
FROM DUAL
WHERE @inboxed_held = 1
ON DUPLICATE KEY UPDATE started_at = started_at;
SELECT id FROM {{schema}}.`{{prefix}}workers` WHERE id = $1 AND @inboxed_held = 1
