-- check_durability: the two settings that decide whether an acknowledged commit survives a
-- crash. synchronous_commit = off acks before the WAL flush; fsync = off never flushes.
-- (local and remote_write are durable on this server, which is what commit-then-ack needs.)
SELECT current_setting('synchronous_commit') AS synchronous_commit,
       current_setting('fsync') AS fsync
