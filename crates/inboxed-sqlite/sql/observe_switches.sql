-- observe_switches: per consumer, its kill switches that are open, for `inboxed stats` and the
-- console. No parameters.
--
-- A switch's row is refreshed every 30 s while it is open (kill_switch/report.rs); one not
-- refreshed for 3 minutes belongs to a process that died, or one that cannot reach this
-- database, and is left out. Times are milliseconds since the epoch.
SELECT consumer_name,
       count(*) AS open,
       min(opened_at) AS opened_at_ms,
       min(next_probe_at) AS next_probe_at_ms,
       max(seen_at) AS seen_at_ms
FROM {{schema}}."{{prefix}}kill_switches"
WHERE seen_at > CAST(unixepoch('subsec') * 1000 AS INTEGER) - 180000
GROUP BY consumer_name
ORDER BY consumer_name
