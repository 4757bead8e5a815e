-- forget_workers: removes registrations: the reaper's, once it has returned a dead worker's
-- rows, and a worker's own when it stops cleanly, on its liveness connection. $1 worker ids
-- (a JSON array)
--
-- Only where the lock is free (the worker is dead) or held by this very session (the worker
-- stopping). A dead-looking worker whose connection came back and registered again holds its
-- lock from another session, and keeps its registration. The delete locks each row before it
-- reads the lock's state, and a registration writes its row after taking the lock: a worker
-- registering again while the row is being forgotten waits for this delete and then writes
-- its row anew. Joined from the list by primary key (claim_stamp.sql says why not `IN`).
DELETE w
FROM JSON_TABLE($1, '$[*]' COLUMNS (id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$')) AS k
STRAIGHT_JOIN {{schema}}.`{{prefix}}workers` w ON w.id = k.id COLLATE utf8mb4_bin
WHERE IS_FREE_LOCK(w.lock_name) = 1 OR IS_USED_LOCK(w.lock_name) = CONNECTION_ID()
