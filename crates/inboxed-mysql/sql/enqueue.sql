-- enqueue: the store-then-process receipt: stores a message unless its key is stored already.
-- Returns the new row's id, or no row for a duplicate (the store then reads enqueue_lookup).
-- $1 consumer_name, $2 message_id, $3 aggregate_id, $4 message_type, $5 correlation_id,
-- $6 payload, $7 payload_hash
--
-- A plain INSERT whose error 1062 is "no row" (claim.sql says why not INSERT IGNORE). MySQL has
-- no INSERT … RETURNING (MariaDB's is not MySQL's): the id is LAST_INSERT_ID() of this
-- connection, read right after. Times are milliseconds since the epoch (migration 2).
--! duplicate key: no rows
INSERT INTO {{schema}}.`{{prefix}}inbox_messages`
    (consumer_name, message_id, aggregate_id, message_type, correlation_id, payload,
     payload_hash, received_at, available_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000),
        FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000));
SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id
