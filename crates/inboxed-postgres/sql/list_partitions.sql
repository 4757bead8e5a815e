-- list_partitions: the processed-keys partitions of the partitioned mode, for an operator:
-- name, time bounds (ms since the epoch), state (attached, pending detach, detached and not
-- dropped yet) and size with indexes. No parameters. Bounds come from
-- processed_log_partitions (migration 5).
SELECT p.partition, p.lower_ms::bigint AS lower_ms, p.upper_ms::bigint AS upper_ms, p.state,
       pg_total_relation_size(p.partition::regclass) AS bytes
FROM {{schema}}."{{prefix}}processed_log_partitions"() p
ORDER BY p.lower_ms NULLS LAST, p.partition
