-- switch_close: a kill switch closed, or the run that reported it ended. Also deletes the rows
-- of the consumer's switches that nobody refreshed for an hour: their processes died open.
-- ?1 consumer_name, ?2 switch_id
DELETE FROM {{schema}}."{{prefix}}kill_switches"
WHERE consumer_name = ?1
  AND (switch_id = ?2 OR seen_at < CAST(unixepoch('subsec') * 1000 AS INTEGER) - 3600000)
