-- lock_processed_log: the maintenance session takes the time-partitioned table for itself
-- before it drops a partition, then checks the partition again and drops it, then runs UNLOCK
-- TABLES. No parameters.
--
-- The expiry check is a plain read: it does not see a claim still uncommitted, and DROP
-- PARTITION, which waits for that claim's transaction, then deleted the key the claim had just
-- committed (a re-driven message with an old id, measured by a review on MariaDB 10.11: the
-- key was gone 50 ms after its commit). LOCK TABLES … WRITE waits (up to the session's
-- lock_wait_timeout) until every transaction that touched the table has ended and keeps new
-- claims out until UNLOCK, so the second check sees every key the partition will ever hold.
-- The aliases are partition_consumers.sql's, which reads the table under them.
LOCK TABLES {{schema}}.`{{prefix}}processed_log` WRITE,
    {{schema}}.`{{prefix}}processed_log` AS pc READ,
    {{schema}}.`{{prefix}}processed_log` AS pn READ
