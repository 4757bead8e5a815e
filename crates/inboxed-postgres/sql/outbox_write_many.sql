-- outbox_write_many: many outgoing messages in one statement on the caller's connection,
-- inside the caller's transaction: a batch handler's messages cost one round trip, not one
-- each. The arrays are parallel, one element per message, in the order they were written.
-- $1 message_ids text[], $2 destinations text[], $3 ordering_keys text[], $4 message_types
-- text[], $5 correlation_ids text[], $6 headers text[] (JSON objects of strings), $7 payloads
-- bytea[], $8 caused_by_consumers text[], $9 caused_by_message_ids text[], $10 notify (boolean)
--
-- WITH ORDINALITY and the ORDER BY give the rows ids in the arrays' order, so that the rows
-- of one ordering key are published in the order the caller wrote them. One notification for
-- the statement, as outbox_write.sql sends for a transaction.
WITH written AS (
    INSERT INTO {{schema}}."{{prefix}}outbox_messages"
        (message_id, destination, ordering_key, message_type, correlation_id, headers, payload,
         caused_by_consumer, caused_by_message_id)
    SELECT m, d, k, t, c, h::jsonb, p, cc, cm
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                $7::bytea[], $8::text[], $9::text[])
         WITH ORDINALITY AS u(m, d, k, t, c, h, p, cc, cm, n)
    ORDER BY n
    RETURNING 1
)
SELECT pg_notify('{{prefix}}outbox', '') WHERE $10 AND EXISTS (SELECT 1 FROM written)
