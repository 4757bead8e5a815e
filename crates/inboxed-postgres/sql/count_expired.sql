-- count_expired: how many keys of consumer $1 were received before $2 (ms since the epoch),
-- counting at most $3: the dry run's answer.
-- $1 consumer_name, $2 cut-off (ms), $3 cap
--
-- The LIMIT bounds the index range read, so a dry run on a table far behind its window
-- answers "at least $3" quickly instead of counting every expired row.
SELECT count(*) FROM (
    SELECT 1 FROM {{schema}}."{{prefix}}{{processed}}"
    WHERE consumer_id = (SELECT id FROM {{schema}}."{{prefix}}consumers" WHERE name = $1)
      AND received_s < (floor($2::float8 / 1000) - 1577836800)::integer
    LIMIT $3
) expired
