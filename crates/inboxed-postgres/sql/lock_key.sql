-- lock_key: partitioned mode only. Takes a transaction-scoped advisory lock on one key, held to
-- commit or rollback, before the claim probes for it.
-- $1 consumer_name, $2 message_id
--
-- A statement of its own, on purpose: under READ COMMITTED the claim that follows takes its
-- snapshot after this lock was granted, so it sees the row of a concurrent duplicate that held
-- the lock and committed. (Folded into the claim's statement, the snapshot would predate the
-- wait and miss it.) Two keys hashing alike only wait for each other; never a wrong answer.
SELECT pg_advisory_xact_lock(hashtextextended($1 || '|' || $2, 0))
