-- claim_partitioned: partitioned mode's claim, run right after lock_key in the same
-- transaction. Records the key unless a live partition holds it or it is dead-lettered.
-- $1 consumer_name, $2 message_id, $3 message_key (the id's stored form, see migration 1),
-- $4 payload fingerprint (first 4 bytes of its SHA-256)
--
-- The table has no unique key on (consumer_id, message_key) (PostgreSQL requires the partition
-- key in every unique constraint), so the key lock stands in for it: whoever holds the lock
-- probes every live partition through processed_log_key_idx and inserts only if the key is
-- nowhere. One row affected means "new"; zero means "look up why" (lookup.sql), as in claim.sql.
WITH k AS (
    SELECT (SELECT id FROM {{schema}}."{{prefix}}consumers" WHERE name = $1) AS consumer_id,
           $3::bytea AS message_key
)
INSERT INTO {{schema}}."{{prefix}}processed_log" (consumer_id, message_key, fingerprint)
SELECT k.consumer_id, k.message_key, $4
FROM k
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}processed_log" p
    WHERE p.consumer_id = k.consumer_id AND p.message_key = k.message_key
)
AND NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}dead_letters" d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
)
