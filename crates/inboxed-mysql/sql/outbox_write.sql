-- outbox_write: one outgoing message on the caller's connection, inside the caller's
-- transaction, so that it exists exactly when the business change beside it commits.
-- $1 message_id (a time-ordered UUID minted at the write), $2 destination, $3 ordering_key,
-- $4 message_type, $5 correlation_id, $6 headers (a JSON object of strings, as text),
-- $7 payload, $8 caused_by_consumer, $9 caused_by_message_id, $10 notify
--
-- No notifications on MySQL: relays poll. $10 means nothing here; the condition only names
-- it, since every engine's statement takes the same parameters (it is never NULL). A plain
-- INSERT: a second write of one message id is a duplicate key error (1062), not a silent
-- skip, as the other engines' unique constraint makes it.
INSERT INTO {{schema}}.`{{prefix}}outbox_messages`
    (message_id, destination, ordering_key, message_type, correlation_id, headers, payload,
     caused_by_consumer, caused_by_message_id, created_at, available_at)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9,
       FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000), FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000)
FROM DUAL
WHERE $10 IS NOT NULL
