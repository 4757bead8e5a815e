-- dead_letter: writes the dead letter of a key unless the key was processed or already has
-- one. Never overwrites: the first record keeps its reason and error. Changes one row when it
-- wrote one.
-- $1 consumer_name, $2 message_id (NULL: no usable key), $3 message_type, $4 correlation_id,
-- $5 payload, $6 payload_hash, $7 reason, $8 error, $9 attempts, $10 conflict_hash (empty
-- unless reason = 'conflict')
--
-- A record already there is InnoDB's error 1062 on the unique key, made "no row" by the
-- directive: a change of none (see claim.sql for why not INSERT IGNORE). The guard skips a
-- processed key with a plain read; conflicts are exempt, their key is processed by definition.
--! duplicate key: no rows
INSERT INTO {{schema}}.`{{prefix}}dead_letters`
    (consumer_name, message_id, message_type, correlation_id, payload, payload_hash,
     reason, error, attempts, conflict_hash)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 FROM DUAL
WHERE $7 = 'conflict' OR $2 IS NULL OR NOT EXISTS (
    SELECT 1 FROM {{schema}}.`{{prefix}}{{processed}}` p
    WHERE p.consumer_name = $1 AND p.message_id = $2
);
-- Then the check that decides, after the write: a redelivery past max_attempts runs this while
-- an earlier delivery of the key may still be in its handler, its claim uncommitted (seen in
-- `inboxed demo`). The locking read waits for that claim's commit or rollback; claim.sql writes
-- first and checks for this dead letter the same way (it says why both orders are needed).
-- Deleting the row undoes the dead letter; the store then finds the key processed.
--! undo: no rows
DELETE FROM {{schema}}.`{{prefix}}dead_letters`
WHERE consumer_name = $1 AND message_id = $2 AND conflict_hash = $10 AND reason <> 'conflict'
  AND EXISTS (
    SELECT 1 FROM {{schema}}.`{{prefix}}{{processed}}` p
    WHERE p.consumer_name = $1 AND p.message_id = $2
    LOCK IN SHARE MODE
  )
