-- switch_open: a kill switch is open (it just opened, a probe failed, or its row is refreshed
-- while it stays open). Its own statement, outside any handler transaction.
-- $1 consumer_name, $2 switch_id, $3 opened_at (ms), $4 next_probe_at (ms)
INSERT INTO {{schema}}."{{prefix}}kill_switches"
    (consumer_name, switch_id, opened_at, next_probe_at, seen_at)
VALUES ($1, $2, to_timestamp($3::float8 / 1000), to_timestamp($4::float8 / 1000), now())
ON CONFLICT (consumer_name, switch_id) DO UPDATE
SET opened_at = excluded.opened_at, next_probe_at = excluded.next_probe_at, seen_at = now()
