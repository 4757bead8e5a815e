-- purge_done: deletes at most $2 done rows finished before $1 (ms since the epoch), oldest
-- first. Done rows are this variant's dedup memory, so the cut-off is a correctness setting:
-- it must lie further back than any redelivery, dead-letter replay or offset reset.
-- The caller repeats until fewer than $2 rows come back; each batch is its own transaction,
-- which bounds lock time, WAL volume and replica lag.
--
-- The outer conditions are repeated on purpose: a re-drive that resets a chosen row to pending
-- while this runs makes PostgreSQL recheck only the outer WHERE on the new row version.
DELETE FROM {{schema}}."{{prefix}}inbox_messages"
WHERE status = 'done' AND done_at < to_timestamp($1::float8 / 1000) AND id IN (
    SELECT id FROM {{schema}}."{{prefix}}inbox_messages"
    WHERE status = 'done' AND done_at < to_timestamp($1::float8 / 1000)
    ORDER BY done_at
    LIMIT $2
)
