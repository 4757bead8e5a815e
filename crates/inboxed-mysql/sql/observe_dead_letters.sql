-- observe_dead_letters: dead letters kept, per consumer and reason, with the newest failure
-- (milliseconds since the epoch; the store's sessions run in UTC). No parameters.
SELECT CONVERT(consumer_name USING utf8mb4) AS consumer_name, reason,
       CAST(COUNT(*) AS SIGNED) AS count,
       CAST(FLOOR(UNIX_TIMESTAMP(MAX(last_failed_at)) * 1000) AS SIGNED) AS newest_ms
FROM {{schema}}.`{{prefix}}dead_letters`
GROUP BY consumer_name, reason
ORDER BY consumer_name, reason
