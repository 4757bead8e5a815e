-- outbox_write_many: many outgoing messages with one statement on the caller's connection,
-- inside the caller's transaction: a batch handler's messages cost one round trip, not one
-- each. The store cuts a long list into parts (outbox.rs), each far below the server's
-- max_allowed_packet.
-- $1 the messages as a JSON array of [message_id, destination, ordering_key, message_type,
-- correlation_id, headers (a JSON object of strings, as text), payload in base64,
-- caused_by_consumer, caused_by_message_id], in the order they were written
--
-- FOR ORDINALITY and the ORDER BY give the rows ids in the list's order, so that the rows of
-- one ordering key are published in the order the caller wrote them. Every column is LONGTEXT:
-- JSON_TABLE cuts a value longer than its column with a mere warning whatever the sql_mode,
-- where a value too long for the table fails the insert (the write refuses those first). No
-- notifications on MySQL: relays poll. A prepared statement, not a text query: the payloads
-- travel once, not twice over in hex.
INSERT INTO {{schema}}.`{{prefix}}outbox_messages`
    (message_id, destination, ordering_key, message_type, correlation_id, headers, payload,
     caused_by_consumer, caused_by_message_id, created_at, available_at)
SELECT CAST(m.message_id AS BINARY), m.destination, CAST(m.ordering_key AS BINARY),
       m.message_type, m.correlation_id, m.headers, FROM_BASE64(m.payload),
       CAST(m.caused_by_consumer AS BINARY), CAST(m.caused_by_message_id AS BINARY),
       FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)
FROM JSON_TABLE($1, '$[*]' COLUMNS (
    position             FOR ORDINALITY,
    message_id           LONGTEXT CHARACTER SET utf8mb4 PATH '$[0]',
    destination          LONGTEXT CHARACTER SET utf8mb4 PATH '$[1]',
    ordering_key         LONGTEXT CHARACTER SET utf8mb4 PATH '$[2]',
    message_type         LONGTEXT CHARACTER SET utf8mb4 PATH '$[3]',
    correlation_id       LONGTEXT CHARACTER SET utf8mb4 PATH '$[4]',
    headers              LONGTEXT CHARACTER SET utf8mb4 PATH '$[5]',
    payload              LONGTEXT CHARACTER SET ascii PATH '$[6]',
    caused_by_consumer   LONGTEXT CHARACTER SET utf8mb4 PATH '$[7]',
    caused_by_message_id LONGTEXT CHARACTER SET utf8mb4 PATH '$[8]'
)) AS m
ORDER BY m.position
