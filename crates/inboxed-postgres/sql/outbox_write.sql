-- outbox_write: one outgoing message on the caller's connection, inside the caller's
-- transaction, so that it exists exactly when the business change beside it commits.
-- $1 message_id (a time-ordered UUID minted at the write), $2 destination, $3 ordering_key,
-- $4 message_type, $5 correlation_id, $6 headers (a JSON object of strings, as text),
-- $7 payload, $8 caused_by_consumer, $9 caused_by_message_id, $10 notify (boolean)
--
-- The notification reaches idle relays at the commit, and never on a rollback. PostgreSQL
-- folds identical notifications of one transaction into one, so a transaction that writes
-- many messages wakes the relays once. A notifying commit takes a cluster-wide lock for its
-- duration, so notifying commits run one at a time: a writer of many small transactions may
-- turn it off ($10 false) and leave the relays to poll.
WITH written AS (
    INSERT INTO {{schema}}."{{prefix}}outbox_messages"
        (message_id, destination, ordering_key, message_type, correlation_id, headers, payload,
         caused_by_consumer, caused_by_message_id)
    VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9)
    RETURNING id
)
SELECT pg_notify('{{prefix}}outbox', '') FROM written WHERE $10
