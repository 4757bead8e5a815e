-- enqueue_many: the store-then-process receipt of many messages in one statement, inside the
-- caller's transaction (one commit for the batch, then the broker acks them all), skipping the
-- keys already stored: the second try of a batch that enqueue_many_new.sql could not store
-- whole.
-- $1 consumer_name, and one array per column, each holding the batch in arrival order:
-- $2 message_id text[], $3 aggregate_id text[] (NULL: none), $4 message_type text[],
-- $5 correlation_id text[], $6 payload bytea[], $7 payload_hash bytea[], $8 headers text[]
--
-- Returns the id and position (1-based) of each new row. A key already stored, or given twice
-- in the batch (the later one loses to ON CONFLICT DO NOTHING), returns nothing; the caller
-- reads its stored hash with enqueue_lookup_many.sql, in the same transaction, to tell a
-- duplicate from a conflict.
WITH serial AS (
    -- As enqueue.sql: receipts of one aggregate are serialized by a transaction-scoped lock,
    -- here every aggregate of the batch, taken in hash order so that two batches sharing
    -- aggregates cannot deadlock, before any id is drawn.
    SELECT count(pg_advisory_xact_lock(k)) AS held
    FROM (
        SELECT DISTINCT hashtextextended($1 || '|' || a, 0) AS k
        FROM unnest($3::text[]) AS a
        WHERE a IS NOT NULL
        ORDER BY 1
    ) AS keys
),
stored AS (
    INSERT INTO {{schema}}."{{prefix}}inbox_messages"
        (consumer_name, message_id, aggregate_id, message_type, correlation_id, payload,
         payload_hash, headers)
    -- In position order, so that ids follow arrival order (ordered mode reads it from them).
    SELECT $1, m.message_id, m.aggregate_id, m.message_type, m.correlation_id, m.payload,
           m.payload_hash, m.headers
    FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bytea[],
                $8::text[])
         WITH ORDINALITY AS m(message_id, aggregate_id, message_type, correlation_id, payload,
                              payload_hash, headers, position)
    CROSS JOIN serial
    ORDER BY m.position
    ON CONFLICT (consumer_name, message_id) DO NOTHING
    RETURNING id, message_id
)
SELECT stored.id, stored.message_id FROM stored
