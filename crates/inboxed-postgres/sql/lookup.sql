-- lookup: after a claim inserted nothing, says why: processed (with its payload fingerprint, for
-- conflict detection) or dead-lettered. Only runs on the duplicate path. Should both exist (a
-- dead letter written while a concurrent delivery processed the key), "processed" wins.
-- $1 consumer_name, $2 message_id, $3 message_key (the id's stored form, see migration 1)
--
-- Under READ COMMITTED this statement takes a fresh snapshot, so it sees the row whose
-- commit the claim waited for.
SELECT 'processed' AS state, fingerprint
FROM {{schema}}."{{prefix}}{{processed}}"
WHERE consumer_id = (SELECT id FROM {{schema}}."{{prefix}}consumers" WHERE name = $1)
  AND message_key = $3
UNION ALL
SELECT 'dead_lettered' AS state, NULL::integer
FROM {{schema}}."{{prefix}}dead_letters"
WHERE consumer_name = $1 AND message_id = $2 AND reason <> 'conflict'
ORDER BY state DESC
LIMIT 1
