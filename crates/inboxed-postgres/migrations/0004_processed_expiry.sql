-- 0004: retention is per consumer, so the purge and the oldest-key figure look up one
-- consumer's keys by age: (consumer_id, received_s) serves both as range scans. A btree and not
-- a BRIN: the purge frees whole pages at the old end of the heap, new keys then fill them, and a
-- BRIN range's summary only ever widens, so after a few purges every range would match every
-- cut-off and each purge batch would read the table. 16 bytes of key; inserts land at the right
-- end of each consumer's range, so the pages fill. Same template rules as 0001.

CREATE INDEX "{{prefix}}processed_messages_expiry_idx"
    ON {{schema}}."{{prefix}}processed_messages" (consumer_id, received_s);

-- The oldest key of consumer `cid`, in seconds since 2020, or NULL: the stats call's oldest-key
-- age. One end of the expiry index. processed_log_oldest (0005) is its partitioned counterpart;
-- the stats query names either through the same template placeholder.
CREATE FUNCTION {{schema}}."{{prefix}}processed_messages_oldest"(cid integer) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
RETURN (SELECT min(received_s) FROM {{schema}}."{{prefix}}processed_messages"
        WHERE consumer_id = cid);
