-- replay_select: the rows a replay or re-drive would reset, and which were done; locked until
-- the reset commits. Redacted done rows are left out (their payload is gone).
-- $1 consumer_name, $2 ids (a JSON array; NULL: any), $3 aggregate_id (NULL: any), $4 received
-- from (ms; NULL: open), $5 received before (ms; NULL: open), $6 include done
--
-- The status test comes first as an IN list, so that the read walks the claim index's dead and
-- done entries only and never locks (or waits on) a row a worker holds.
SELECT id, status = 'done' AS was_done
FROM {{schema}}.`{{prefix}}inbox_messages`
WHERE consumer_name = $1
  AND status IN ('dead', 'done')
  AND ($2 IS NULL OR JSON_CONTAINS($2, CAST(id AS CHAR)))
  AND ($3 IS NULL OR aggregate_id = $3)
  AND ($4 IS NULL OR received_at >= $4)
  AND ($5 IS NULL OR received_at < $5)
  AND (status = 'dead' OR ($6 AND NOT payload_redacted))
ORDER BY id
FOR UPDATE
