-- claim_many: claim for several distinct keys of one consumer in one statement, inside the
-- batch's transaction (plain table only; the partitioned store claims key by key under its
-- key locks). Returns the stored form of each key it inserted; the others go to lookup.sql.
-- $1 consumer_name, $2 message ids (text[]), $3 their stored forms (bytea[]),
-- $4 their payload fingerprints (integer[]); the three arrays are parallel, the ids distinct.
--
-- One statement instead of one per key: in a batch of 100 the round trips, not the inserts,
-- were the cost. Rows are inserted in byte order of the id (COLLATE "C"), the order in which
-- record_attempts counts and clear_many_attempts clears them, so that two batches sharing
-- keys wait on each other instead of deadlocking. As in claim.sql, a key held by a concurrent
-- uncommitted claim makes this wait, then skips it if that claim commits.
INSERT INTO {{schema}}."{{prefix}}processed_messages" (consumer_id, message_key, fingerprint)
SELECT (SELECT id FROM {{schema}}."{{prefix}}consumers" WHERE name = $1), k.key, k.fp
FROM unnest($2::text[], $3::bytea[], $4::integer[]) AS k(id, key, fp)
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}."{{prefix}}dead_letters" d
    WHERE d.consumer_name = $1 AND d.message_id = k.id AND d.reason <> 'conflict'
)
ORDER BY k.id COLLATE "C"
ON CONFLICT (consumer_id, message_key) DO NOTHING
RETURNING message_key
