-- outbox_write: one outgoing message on the caller's connection, inside the caller's
-- transaction, so that it exists exactly when the business change beside it commits.
-- ?1 message_id (a time-ordered UUID minted at the write), ?2 destination, ?3 ordering_key,
-- ?4 message_type, ?5 correlation_id, ?6 headers (a JSON object of strings, as text),
-- ?7 payload, ?8 caused_by_consumer, ?9 caused_by_message_id, ?10 notify
--
-- SQLite has no notifications: relays poll. ?10 means nothing here; the condition only names
-- it, since every engine's statement takes the same parameters (it is never NULL).
INSERT INTO {{schema}}."{{prefix}}outbox_messages"
    (message_id, destination, ordering_key, message_type, correlation_id, headers, payload,
     caused_by_consumer, caused_by_message_id)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9
WHERE ?10 IS NOT NULL
