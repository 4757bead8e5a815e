-- partition_consumers: partitioned mode. The distinct consumers with keys in one partition
-- ({{partition}}, a quoted name from expired_partitions), before it is dropped: a partition
-- goes only when every consumer in it is known to the purger and past its own window.
--
-- A loose index scan: each step jumps to the next consumer through the partition's
-- (consumer_id, message_key) index, so it reads one index entry per consumer instead of every
-- row of a partition that may hold millions. An id missing from the registry comes back as
-- '#<id>', a name no purger declares, so that its partition is kept.
WITH RECURSIVE c AS (
    (SELECT consumer_id FROM {{partition}} ORDER BY consumer_id LIMIT 1)
    UNION ALL
    SELECT (SELECT p.consumer_id FROM {{partition}} p
            WHERE p.consumer_id > c.consumer_id
            ORDER BY p.consumer_id LIMIT 1)
    FROM c
    WHERE c.consumer_id IS NOT NULL
)
SELECT coalesce(r.name, '#' || c.consumer_id)
FROM c
LEFT JOIN {{schema}}."{{prefix}}consumers" r ON r.id = c.consumer_id
WHERE c.consumer_id IS NOT NULL
