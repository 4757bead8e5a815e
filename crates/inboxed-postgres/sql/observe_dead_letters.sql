-- observe_dead_letters: dead letters kept, per consumer and reason, with the newest failure.
-- No parameters. The table holds only what failed, so a grouped scan is what it costs.
SELECT consumer_name, reason, count(*) AS count,
       (extract(epoch FROM max(last_failed_at)) * 1000)::bigint AS newest_ms
FROM {{schema}}."{{prefix}}dead_letters"
GROUP BY consumer_name, reason
ORDER BY consumer_name, reason
