-- partition_consumers: partitioned mode. The distinct consumers with keys in one partition
-- ({{partition}}, a quoted name from expired_partitions), before it is dropped: a partition
-- goes only when every consumer in it is known to the purger and past its own window.
--
-- A loose index scan: each step jumps to the next consumer through the partition's
-- (consumer_name, message_id) index, so it reads one index entry per consumer instead of every
-- row of a partition that may hold millions.
WITH RECURSIVE c AS (
    (SELECT consumer_name FROM {{partition}} ORDER BY consumer_name LIMIT 1)
    UNION ALL
    SELECT (SELECT p.consumer_name FROM {{partition}} p
            WHERE p.consumer_name > c.consumer_name
            ORDER BY p.consumer_name LIMIT 1)
    FROM c
    WHERE c.consumer_name IS NOT NULL
)
SELECT consumer_name FROM c WHERE consumer_name IS NOT NULL
