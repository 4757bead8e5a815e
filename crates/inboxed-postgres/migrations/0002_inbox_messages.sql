-- 0002: the store-then-process inbox. Receipt stores the raw message and acks; workers claim
-- rows, run the handler and mark them done in the same transaction as the business change.
-- Same template rules as 0001.

CREATE TABLE {{schema}}."{{prefix}}inbox_messages" (
    -- Arrival order. Ordering within an aggregate follows it, so it must be assigned at
    -- receipt, by the database, never by a clock that could go backwards.
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_name    text        NOT NULL,
    -- Producer-assigned key; with consumer_name the dedup key of the receipt.
    message_id       text        NOT NULL,
    -- Rows of one aggregate are processed one at a time, in arrival order, when the worker
    -- runs in ordered mode. NULL: no ordering constraint.
    aggregate_id     text,
    message_type     text,
    correlation_id   text,
    -- Raw bytes, so non-JSON bodies are accepted and replay has the exact original.
    payload          bytea       NOT NULL,
    -- SHA-256 of the payload: a redelivery with another payload is a conflict, not a duplicate.
    payload_hash     bytea       NOT NULL,
    -- pending -> processing -> done | dead; processing -> pending on failure or lease expiry.
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'processing', 'done', 'dead')),
    received_at      timestamptz NOT NULL DEFAULT now(),
    -- Not before this: exponential backoff after a failure.
    available_at     timestamptz NOT NULL DEFAULT now(),
    -- Claims so far, counted when the row is claimed, before the handler runs: a row whose
    -- handler kills its worker still reaches 'dead' after max_attempts.
    attempts         integer     NOT NULL DEFAULT 0,
    claimed_at       timestamptz,
    claimed_by       text,
    -- The lease: the reaper returns the row to pending after this. Heartbeats move it on.
    lease_expires_at timestamptz,
    -- Fences completion: only the holder of the current claim's token can mark the row done,
    -- so a slow worker whose lease was reaped and re-claimed cannot also complete it.
    claim_token      bytea,
    last_error       text,
    done_at          timestamptz,
    UNIQUE (consumer_name, message_id)
);

-- Serves the claim: only pending rows, in arrival order, per consumer. Partial, so it stays
-- small however many done rows the table holds.
CREATE INDEX "{{prefix}}inbox_messages_pending_idx"
    ON {{schema}}."{{prefix}}inbox_messages" (consumer_name, id) WHERE status = 'pending';
-- Serves the ordered-mode check for an earlier unfinished (or parked) row of the same aggregate.
CREATE INDEX "{{prefix}}inbox_messages_aggregate_idx"
    ON {{schema}}."{{prefix}}inbox_messages" (consumer_name, aggregate_id, id)
    WHERE status <> 'done' AND aggregate_id IS NOT NULL;
-- Serves the reaper.
CREATE INDEX "{{prefix}}inbox_messages_lease_idx"
    ON {{schema}}."{{prefix}}inbox_messages" (lease_expires_at) WHERE status = 'processing';
-- Serves the purge of done rows by age.
CREATE INDEX "{{prefix}}inbox_messages_done_idx"
    ON {{schema}}."{{prefix}}inbox_messages" (done_at) WHERE status = 'done';

-- Every replay or re-drive: who, when, why, and which rows. Re-driving a done row applies its
-- effect again on purpose, so it must leave a trace.
CREATE TABLE {{schema}}."{{prefix}}redrive_audit" (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    actor         text        NOT NULL,
    reason        text        NOT NULL,
    consumer_name text        NOT NULL,
    -- The selector as given (ids, status, aggregate, time range), for the record.
    selector      text        NOT NULL,
    -- How many rows were reset, and how many of them had been done.
    row_count     bigint      NOT NULL,
    done_count    bigint      NOT NULL,
    -- The ids reset, in order.
    ids           bigint[]    NOT NULL
);
