-- purge_processed: deletes at most $3 processed keys of consumer $1 received before $2 (ms
-- since the epoch), oldest first.
-- $1 consumer_name, $2 cut-off (ms), $3 limit
--
-- received_s holds whole seconds since 2020 rounded down, so comparing it with the cut-off
-- rounded down takes only keys received before the cut-off. The cut-off is cast to integer: a
-- float8 on the right would cast the column instead, and the index could no longer bound time.
--
-- Run in a short transaction of its own under statement and lock timeouts (set when it
-- begins), repeated by the purger until a batch comes back short: bounded batches keep lock
-- time, WAL bursts and replica lag small, where one unbounded DELETE would hold its locks for
-- minutes. The rows are found in index order through (consumer_id, received_s) and deleted
-- by their physical address: processed keys are never updated, so the address found is the
-- row deleted. A key being claimed right now by a duplicate is not locked by that claim
-- (ON CONFLICT DO NOTHING takes no lock on the existing row), so the purge never waits on the
-- hot path, and the hot path never waits on it beyond the index pages both touch.
DELETE FROM {{schema}}."{{prefix}}{{processed}}"
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM {{schema}}."{{prefix}}{{processed}}"
    WHERE consumer_id = (SELECT id FROM {{schema}}."{{prefix}}consumers" WHERE name = $1)
      AND received_s < (floor($2::float8 / 1000) - 1577836800)::integer
    ORDER BY received_s
    LIMIT $3
))
