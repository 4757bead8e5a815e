-- observe_dead_letters: dead letters kept, per consumer and reason, with the newest failure.
-- No parameters. Failure times are ISO-8601 text here; they come back as milliseconds since
-- the epoch, as in every backend.
SELECT consumer_name, reason, count(*) AS count,
       CAST(round((julianday(max(last_failed_at)) - 2440587.5) * 86400000) AS INTEGER) AS newest_ms
FROM {{schema}}."{{prefix}}dead_letters"
GROUP BY consumer_name, reason
ORDER BY consumer_name, reason
