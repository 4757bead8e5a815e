-- 0017: the kill switches that are open now, one row per switch, so that `inboxed stats` and
-- the console can say that a consumer is paused and since when (the gauge
-- inboxed_kill_switch_open says it per process, to whoever scrapes each one). Same template
-- rules as 0001.
--
-- A running consumer or worker writes its switch's row when the switch opens, refreshes it
-- while it stays open, and deletes it when it closes or the run ends; a row whose process died
-- is no longer refreshed, and the reads leave it out after a few minutes (observe_switches.sql).
-- Times in milliseconds since the Unix epoch.
CREATE TABLE IF NOT EXISTS {{schema}}."{{prefix}}kill_switches" (
    consumer_name TEXT    NOT NULL,
    -- one switch value (KillSwitch), random per process: replicas have a row each
    switch_id     TEXT    NOT NULL,
    opened_at     INTEGER NOT NULL,
    next_probe_at INTEGER NOT NULL,
    seen_at       INTEGER NOT NULL,
    PRIMARY KEY (consumer_name, switch_id)
);
