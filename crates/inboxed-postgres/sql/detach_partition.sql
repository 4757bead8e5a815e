-- detach_partition: partitioned mode. Detaches one expired partition ({{partition}}, a quoted
-- name from expired_partitions) without blocking claims.
--
-- CONCURRENTLY (PostgreSQL 14 and later) takes only a SHARE UPDATE EXCLUSIVE lock on the
-- parent, which claims (ROW EXCLUSIVE) do not conflict with; a plain DETACH or a DROP of an
-- attached partition would queue an ACCESS EXCLUSIVE lock behind every open claim and stall
-- all new ones behind it. It cannot run in a transaction block. Interrupted, it leaves the
-- partition "detach pending", which the next pass finishes with {{finalize}} = FINALIZE (empty
-- otherwise: CONCURRENTLY).
ALTER TABLE {{schema}}."{{prefix}}processed_log" DETACH PARTITION {{partition}} {{finalize}}
