-- 0004: per-consumer retention looks up one consumer's keys by age, for the purge and the
-- oldest-key figure; (consumer_name, received_at) replaces the index on received_at alone.
-- Same template rules as 0001.

CREATE INDEX {{schema}}."{{prefix}}processed_messages_expiry_idx"
    ON "{{prefix}}processed_messages" (consumer_name, received_at);
DROP INDEX {{schema}}."{{prefix}}processed_messages_received_at_idx";

-- Creates sqlite_stat1, where the stats call reads its row estimate, reading at most about a
-- thousand rows per index so that it stays cheap on a large existing table. Refresh it with
-- `PRAGMA optimize` from time to time (SQLite's own advice, for example at connection close).
PRAGMA analysis_limit = 1000;
ANALYZE {{schema}};
