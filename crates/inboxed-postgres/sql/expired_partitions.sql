-- expired_partitions: partitioned mode. Candidates for expiry: partitions whose every row was
-- received before $1 (ms since the epoch: now minus the shortest window; the caller checks each
-- partition's consumers against their own windows), plus what an interrupted pass left: a
-- detach cut short (pending) or a detached table not yet dropped (detached).
-- $1 cut-off (ms)
--
-- Names come back quoted and schema-qualified, ready for detach_partition, drop_partition and
-- partition_consumers (identifiers cannot be bind parameters). Bounds come from
-- processed_log_partitions (migration 5), in ms since the epoch.
SELECT partition, upper_ms, state
FROM {{schema}}."{{prefix}}processed_log_partitions"()
WHERE state <> 'attached' OR upper_ms <= $1::float8
ORDER BY upper_ms NULLS FIRST
