-- lookup: after a claim inserted nothing, says why: processed (with its payload hash) or
-- dead-lettered. Only runs on the duplicate path. Should both exist, "processed" wins: the
-- effect is applied.
-- $1 consumer_name, $2 message_id
SELECT 'processed' AS state, payload_hash
FROM {{schema}}.`{{prefix}}{{processed}}`
WHERE consumer_name = $1 AND message_id = $2
UNION ALL
SELECT 'dead_lettered' AS state, NULL
FROM {{schema}}.`{{prefix}}dead_letters`
WHERE consumer_name = $1 AND message_id = $2 AND reason <> 'conflict'
ORDER BY state DESC
LIMIT 1
