-- observe_switches: per consumer, its kill switches that are open, for `inboxed stats` and the
-- console. No parameters.
--
-- A switch's row is refreshed every 30 s while it is open (kill_switch/report.rs); one not
-- refreshed for 3 minutes belongs to a process that died, or one that cannot reach this
-- database, and is left out. Times come back as milliseconds since the epoch.
SELECT consumer_name,
       count(*) AS open,
       (extract(epoch FROM min(opened_at)) * 1000)::bigint AS opened_at_ms,
       (extract(epoch FROM min(next_probe_at)) * 1000)::bigint AS next_probe_at_ms,
       (extract(epoch FROM max(seen_at)) * 1000)::bigint AS seen_at_ms
FROM {{schema}}."{{prefix}}kill_switches"
WHERE seen_at > now() - interval '3 minutes'
GROUP BY consumer_name
ORDER BY consumer_name
