-- enqueue_many: the store-then-process receipt of many messages, inside the receipt's
-- transaction (one commit for the batch, then the broker acks them all). Returns the id and
-- message id of each row stored; no rows when a key of the part was stored already or given
-- twice, and the store then stores that part one message at a time (enqueue.sql).
-- $1 consumer_name, $2 the aggregates of the whole batch as a JSON array of strings (an
-- empty array after the batch's first part), $3 the part's messages as a JSON array of
-- [message_id, aggregate_id, message_type, correlation_id, payload in base64, payload hash
-- in hex, headers in their stored form (migration 10) or null], in arrival order
--
-- Three prepared statements, not one text query: payloads travel as they are bound (a text
-- query would carry them twice over in hex), and the store cuts a batch into parts that each
-- stay far below the server's max_allowed_packet.
--
-- First the aggregates' turns, as enqueue.sql takes them (it says why), here every aggregate of
-- the batch, in the order of their lock rows, before any id is drawn: two batches sharing
-- aggregates wait on each other instead of deadlocking.
INSERT INTO {{schema}}.`{{prefix}}locks` (name)
SELECT DISTINCT CONCAT('aggregate/', CRC32(CONCAT($1, '|', a.id)) & 65535) AS name
FROM JSON_TABLE($2, '$[*]' COLUMNS (id LONGTEXT CHARACTER SET utf8mb4 PATH '$')) AS a
ORDER BY name
ON DUPLICATE KEY UPDATE name = name;
-- Then every message of the part, or none: a plain INSERT (claim.sql says why not INSERT
-- IGNORE), whose duplicate (1062) rolls the statement back whole, so that every row of the
-- part's keys read next is one this statement wrote. In arrival order, so that ids follow it
-- (ordered mode reads it from them). Times are milliseconds since the epoch (migration 2).
-- JSON_TABLE cuts a value longer than its column with a mere warning, whatever the sql_mode:
-- ids fit theirs (512 characters hold the envelope's 512 bytes), and every other column is
-- LONGTEXT, so that a too-long aggregate id fails the insert (1406) as enqueue.sql's does.
--! duplicate key: no rows
INSERT INTO {{schema}}.`{{prefix}}inbox_messages`
    (consumer_name, message_id, aggregate_id, message_type, correlation_id, payload,
     payload_hash, received_at, available_at, headers)
SELECT $1, CAST(m.message_id AS BINARY), CAST(m.aggregate_id AS BINARY), m.message_type,
       m.correlation_id, FROM_BASE64(m.payload), UNHEX(m.hash),
       FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), m.headers
FROM JSON_TABLE($3, '$[*]' COLUMNS (
    position       FOR ORDINALITY,
    message_id     VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[0]',
    aggregate_id   LONGTEXT CHARACTER SET utf8mb4 PATH '$[1]',
    message_type   LONGTEXT CHARACTER SET utf8mb4 PATH '$[2]',
    correlation_id LONGTEXT CHARACTER SET utf8mb4 PATH '$[3]',
    payload        LONGTEXT CHARACTER SET ascii PATH '$[4]',
    hash           VARCHAR(64) CHARACTER SET ascii PATH '$[5]',
    headers        LONGTEXT CHARACTER SET utf8mb4 PATH '$[6]'
)) AS m
ORDER BY m.position;
-- The rows stored, by the unique key from the list (STRAIGHT_JOIN keeps that order).
SELECT STRAIGHT_JOIN i.id, CONVERT(i.message_id USING utf8mb4)
FROM JSON_TABLE($3, '$[*]' COLUMNS (message_id VARCHAR(512) CHARACTER SET utf8mb4 PATH '$[0]'))
    AS m
JOIN {{schema}}.`{{prefix}}inbox_messages` i
    ON i.consumer_name = $1 AND i.message_id = CAST(m.message_id AS BINARY)
