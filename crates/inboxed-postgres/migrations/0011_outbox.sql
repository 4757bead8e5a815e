-- 0011: the transactional outbox (docs/outbox.md). Same template rules as 0001.
--
-- A message a service sends is written here in the same transaction as the business change
-- that caused it, so it exists exactly when that change commits; a relay publishes it after
-- the commit and marks it sent only after the broker confirmed it.
CREATE TABLE {{schema}}."{{prefix}}outbox_messages" (
    -- Insert order, assigned by the database: rows of one ordering key are published in it.
    id                   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The id the message is published under, minted once at the write (a time-ordered UUID):
    -- a re-send after a crash carries the same id, which the next service's inbox
    -- deduplicates.
    message_id           text        NOT NULL UNIQUE,
    -- A logical route, mapped by the relay's configuration to a broker target.
    destination          text        NOT NULL,
    -- Rows of one key are published one at a time, in insert order. NULL: no order.
    ordering_key         text,
    message_type         text,
    correlation_id       text,
    -- A JSON object of strings.
    headers              jsonb       NOT NULL DEFAULT '{}',
    payload              bytea       NOT NULL,
    -- The inbound message whose handling wrote this one, when there is one: what caused it.
    caused_by_consumer   text,
    caused_by_message_id text,
    -- pending -> sending -> sent | dead; sending -> pending on failure or lease expiry.
    status               text        NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'sending', 'sent', 'dead')),
    created_at           timestamptz NOT NULL DEFAULT now(),
    -- Not before this: backoff after a failed publish.
    available_at         timestamptz NOT NULL DEFAULT now(),
    attempts             integer     NOT NULL DEFAULT 0,
    claimed_by           text,
    -- The relay's lease and the token that fences its mark, as the inbox's claims have.
    lease_expires_at     timestamptz,
    claim_token          bytea,
    -- The broker's reason for the last failed publish.
    last_error           text,
    sent_at              timestamptz
);

-- Serves the relay's claim: unsent rows in insert order, small however many were sent.
CREATE INDEX "{{prefix}}outbox_messages_pending_idx"
    ON {{schema}}."{{prefix}}outbox_messages" (id) WHERE status = 'pending';
-- Serves the check for an earlier unsent (or dead: parked) row of the same ordering key.
CREATE INDEX "{{prefix}}outbox_messages_key_idx"
    ON {{schema}}."{{prefix}}outbox_messages" (ordering_key, id)
    WHERE status <> 'sent' AND ordering_key IS NOT NULL;
-- Serves the return of expired leases.
CREATE INDEX "{{prefix}}outbox_messages_lease_idx"
    ON {{schema}}."{{prefix}}outbox_messages" (lease_expires_at) WHERE status = 'sending';
-- Serves the purge of sent rows by age.
CREATE INDEX "{{prefix}}outbox_messages_sent_idx"
    ON {{schema}}."{{prefix}}outbox_messages" (sent_at) WHERE status = 'sent';
