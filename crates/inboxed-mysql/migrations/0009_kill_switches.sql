-- 0009: the kill switches that are open now, one row per switch, as the other engines have it
-- after their migration 17, so that `inboxed stats` and the console can say that a consumer is
-- paused and since when. Same template rules as 0001.
--
-- A running consumer or worker writes its switch's row when the switch opens, refreshes it
-- while it stays open, and deletes it when it closes or the run ends; a row whose process died
-- is no longer refreshed, and the reads leave it out after a few minutes (observe_switches.sql).
CREATE TABLE IF NOT EXISTS {{schema}}.`{{prefix}}kill_switches` (
    consumer_name VARBINARY(128) NOT NULL,
    -- one switch value (KillSwitch), random per process: replicas have a row each
    switch_id     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- milliseconds since the Unix epoch
    opened_at     BIGINT NOT NULL,
    next_probe_at BIGINT NOT NULL,
    seen_at       BIGINT NOT NULL,
    PRIMARY KEY (consumer_name, switch_id)
) ENGINE = InnoDB;
