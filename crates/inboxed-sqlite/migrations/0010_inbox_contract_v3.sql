-- 0010: the group limit of contract version 3 (see the PostgreSQL migration). SQLite has no
-- sessions to hold a lock for a worker's lifetime, so it has no workers table: a dead worker's
-- rows come back when their lease expires.
ALTER TABLE {{schema}}."{{prefix}}inbox_messages" ADD COLUMN group_limit INTEGER;
