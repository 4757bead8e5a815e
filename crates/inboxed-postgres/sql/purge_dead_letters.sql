-- purge_dead_letters: deletes at most $2 dead letters whose last failure was before $1 (ms
-- since the epoch), oldest first; the purger repeats it until a batch comes back short.
-- $1 cut-off (ms), $2 limit
--
-- Dead letters have a retention of their own because their payloads may hold personal data.
-- A key whose dead letter is gone is no longer held back: its next redelivery is attempted
-- again (and dead-lettered again if it still fails). Ids grow with time, so the oldest
-- failures are found along the primary key.
DELETE FROM {{schema}}."{{prefix}}dead_letters"
WHERE id IN (
    SELECT id FROM {{schema}}."{{prefix}}dead_letters"
    WHERE last_failed_at < to_timestamp($1::float8 / 1000)
    ORDER BY id
    LIMIT $2
)
