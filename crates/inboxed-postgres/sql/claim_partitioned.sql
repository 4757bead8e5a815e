-- claim_partitioned: partitioned mode's claim, run right after lock_key in the same
-- transaction. Records the key unless a live partition holds it or it is dead-lettered.
-- $1 consumer_name, $2 message_id, $3 message_type, $4 correlation_id, $5 payload_hash
--
-- The table has no unique key on (consumer_name, message_id) (PostgreSQL requires the partition
-- key in every unique constraint), so the key lock stands in for it: whoever holds the lock
-- probes every live partition through processed_log_key_idx and inserts only if the key is
-- nowhere. One row affected means "new"; zero means "look up why" (lookup.sql), as in claim.sql.
INSERT INTO {{schema}}."{{prefix}}processed_log"
    (consumer_name, message_id, message_type, correlation_id, payload_hash)
SELECT $1, $2, $3, $4, $5
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}processed_log" p
    WHERE p.consumer_name = $1 AND p.message_id = $2
)
AND NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}dead_letters" d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
)
