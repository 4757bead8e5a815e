-- enqueue: the store-then-process receipt. Stores the raw message unless this consumer already
-- has the key; the caller commits (autocommit here) and only then acks the broker.
-- $1 consumer_name, $2 message_id, $3 aggregate_id, $4 message_type, $5 correlation_id,
-- $6 payload, $7 payload_hash, $8 headers (migration 18's stored form; NULL: none)
--
-- Returns the new row's id; no row means the key was already stored, and enqueue_lookup.sql
-- returns its payload hash to tell a duplicate from a conflict. Idle workers are woken by a
-- separate NOTIFY (notify.sql) after the commit: a NOTIFY here would make every committing
-- receipt queue for PostgreSQL's notification lock.
WITH serial AS (
    -- Receipts of one aggregate are serialized: this transaction-scoped lock is taken before
    -- the insert draws its id and held until the receipt commits, so a later id of an
    -- aggregate can never become visible before an earlier one. (Ordered mode reads arrival
    -- order from the id.) No aggregate, no lock.
    SELECT 1 AS held
    FROM (SELECT pg_advisory_xact_lock(hashtextextended($1 || '|' || $3::text, 0))) AS l
    WHERE $3::text IS NOT NULL
),
stored AS (
    INSERT INTO {{schema}}."{{prefix}}inbox_messages"
        (consumer_name, message_id, aggregate_id, message_type, correlation_id, payload,
         payload_hash, headers)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM (VALUES (1)) AS one LEFT JOIN serial ON true
    ON CONFLICT (consumer_name, message_id) DO NOTHING
    RETURNING id
)
SELECT stored.id FROM stored
