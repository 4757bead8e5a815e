-- check_durability: what decides whether an acknowledged commit survives a crash, and a
-- failover. synchronous_commit = off acks before the WAL flush; fsync = off never flushes.
-- (local and remote_write are durable on this server, which is what commit-then-ack needs.)
--
-- Then replication: a primary with standbys that are not synchronous acks a commit before any
-- standby has it, so a failover to one of them loses it (and the inbox's key with it: the
-- message is processed again after the failover, its effect applied twice unless the business
-- change was lost too). The standbys are counted from pg_stat_replication, whose sync_state
-- only a superuser or a member of pg_read_all_stats can read (NULL otherwise).
SELECT current_setting('synchronous_commit') AS synchronous_commit,
       current_setting('fsync') AS fsync,
       pg_is_in_recovery() AS in_recovery,
       current_setting('synchronous_standby_names') AS synchronous_standby_names,
       (SELECT count(*) FROM pg_stat_replication) AS standbys,
       (SELECT count(*) FROM pg_stat_replication
        WHERE sync_state IN ('sync', 'quorum')) AS synchronous,
       (SELECT count(*) FROM pg_stat_replication WHERE sync_state IS NULL) AS unreadable
