-- server_version: the server's version number (150004 for 15.4). Partitioned mode checks it
-- before creating anything: it detaches expired partitions CONCURRENTLY, which PostgreSQL
-- has only since 14, and should fail at startup rather than at the first expiry days later.
SELECT current_setting('server_version_num')::integer
