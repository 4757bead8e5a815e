-- lock_maintenance: partitioned mode. Tries to become the one process maintaining this
-- table's partitions; false when another holds it (that pass is then skipped, not queued).
--
-- A session lock, taken on a connection of its own that is closed after the pass: DETACH
-- CONCURRENTLY cannot run inside a transaction, so a transaction-scoped lock cannot cover the
-- pass, and a dying process's connection takes the lock with it.
SELECT pg_try_advisory_lock(hashtextextended('{{schema}}.{{prefix}}processed_log maintenance', 0))
