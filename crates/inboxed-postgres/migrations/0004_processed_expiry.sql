-- 0004: retention is per consumer, so the purge and the oldest-key figure look up one
-- consumer's keys by age. (consumer_name, received_at) serves both as range scans; it replaces
-- the index on received_at alone, which served neither once windows differ per consumer.
-- Same template rules as 0001.

CREATE INDEX "{{prefix}}processed_messages_expiry_idx"
    ON {{schema}}."{{prefix}}processed_messages" (consumer_name, received_at);
DROP INDEX {{schema}}."{{prefix}}processed_messages_received_at_idx";
