-- replay_select: locks the rows a replay or re-drive would reset, and says which were done.
-- $1 consumer_name, $2 ids (bigint[]; NULL: any), $3 aggregate_id (NULL: any),
-- $4 received from (ms; NULL: open), $5 received before (ms; NULL: open), $6 include done
--
-- Only dead rows, and done rows when asked explicitly, are ever reset: pending and processing
-- rows are already on their way. Done rows whose payload was redacted are left out: their
-- handler would run on nothing.
SELECT id, status = 'done' AS was_done
FROM {{schema}}."{{prefix}}inbox_messages"
WHERE consumer_name = $1
  AND ($2::bigint[] IS NULL OR id = ANY($2))
  AND ($3::text IS NULL OR aggregate_id = $3)
  AND ($4::float8 IS NULL OR received_at >= to_timestamp($4::float8 / 1000))
  AND ($5::float8 IS NULL OR received_at < to_timestamp($5::float8 / 1000))
  AND (status = 'dead' OR (status = 'done' AND $6 AND NOT payload_redacted))
ORDER BY id
FOR UPDATE
