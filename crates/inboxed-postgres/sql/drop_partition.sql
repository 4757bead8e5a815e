-- drop_partition: partitioned mode. Drops one detached partition ({{partition}}, a quoted name
-- returned by expired_partitions): O(1) in its row count, the files are unlinked. Being
-- detached, it shares no lock with the parent.
DROP TABLE IF EXISTS {{partition}}
