-- count_expired: how many of consumer $1's keys a purge at cut-off $2 (ms) would delete,
-- counting no further than $3 (a dry run must stay cheap on a huge backlog).
-- $1 consumer_name, $2 cut-off (ms), $3 cap
SELECT CAST(COUNT(*) AS SIGNED) FROM (
    SELECT 1 FROM {{schema}}.`{{prefix}}{{processed}}`
    WHERE consumer_name = $1 AND received_at < FROM_UNIXTIME($2 / 1000)
    LIMIT $3
) AS expired
