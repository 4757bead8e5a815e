-- claim_partitioned: claim.sql for the time-partitioned table (migration 6): the same write
-- and check, the row's partition column computed from the id with the expression of the
-- table's CHECK, on the id's bytes. One key always lands in one partition, so the primary key
-- makes a duplicate InnoDB's error 1062 as on the plain table, whatever partition is current.
-- $1 consumer_name, $2 message_id, $3 message_type, $4 correlation_id, $5 payload_hash
--! one round trip
--! duplicate key: no rows
INSERT INTO {{schema}}.`{{prefix}}processed_log`
    (consumer_name, message_id, id_ms, message_type, correlation_id, payload_hash)
SELECT $1, k.id, CASE
        WHEN LENGTH(k.id) = 36
         AND SUBSTR(k.id, 9, 1) = '-' AND SUBSTR(k.id, 14, 1) = '-'
         AND SUBSTR(k.id, 15, 1) = '7' AND SUBSTR(k.id, 19, 1) = '-'
         AND SUBSTR(k.id, 24, 1) = '-'
         AND LENGTH(REPLACE(k.id, '-', '')) = 32
         AND UNHEX(REPLACE(k.id, '-', '')) IS NOT NULL
        THEN CONV(CONCAT(SUBSTR(k.id, 1, 8), SUBSTR(k.id, 10, 4)), 16, 10)
        ELSE 0 END,
       $3, $4, $5
FROM (SELECT CAST($2 AS BINARY) AS id) AS k
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}.`{{prefix}}dead_letters` d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
);
-- The check after the write, as claim.sql has it.
--! undo: no rows
DELETE FROM {{schema}}.`{{prefix}}processed_log`
WHERE consumer_name = $1 AND message_id = $2
  AND EXISTS (
    SELECT 1 FROM {{schema}}.`{{prefix}}dead_letters` d
    WHERE d.consumer_name = $1 AND d.message_id = $2 AND d.reason <> 'conflict'
    LOCK IN SHARE MODE
  )
