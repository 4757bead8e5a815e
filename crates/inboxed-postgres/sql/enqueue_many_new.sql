-- enqueue_many_new: the store-then-process receipt of many messages in one statement, inside
-- the caller's transaction (one commit for the batch, then the broker acks them all), taking
-- every key to be new: the first try of a batch receipt.
-- $1 consumer_name, and one array per column, each holding the batch in arrival order:
-- $2 message_id text[], $3 aggregate_id text[] (NULL: none), $4 message_type text[],
-- $5 correlation_id text[], $6 payload bytea[], $7 payload_hash bytea[], $8 headers text[]
--
-- Returns the id and key of each row, every one of them stored. A key already stored (or being
-- stored by a transaction in flight, which it waits for), or given twice in the batch, fails
-- the statement on the unique key (SQLSTATE 23505): the caller rolls back and stores the batch
-- again with enqueue_many.sql, which skips such keys. That is enqueue_many.sql without its
-- ON CONFLICT clause: a speculative insertion a row (an index probe before the insert, a lock
-- on the insertion and a confirming WAL record after it) costs about a third more of the
-- server's time when every key is new, which is what a receipt mostly sees.
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
    RETURNING id, message_id
)
SELECT stored.id, stored.message_id FROM stored
