-- server_version: the server's version number (150004 for 15.4), checked before any
-- migration runs: the library needs PostgreSQL 14 or later (migration 5 reads
-- pg_inherits.inhdetachpending, and partitioned mode detaches partitions CONCURRENTLY), and
-- says so up front instead of failing inside a migration.
SELECT current_setting('server_version_num')::integer
