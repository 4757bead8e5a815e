-- 0013: the outbox relay's lock-held claim and the halving of a crashed batch (docs/outbox.md,
-- "How the relay holds its rows"). Same template rules as 0001.
--
-- group_limit: a row that was in a batch whose relay died may be published with at most this
-- many rows (half the batch), so that a row which kills its relay is cornered by halving
-- instead of taking its batch's other rows with it to the dead state. NULL: no limit.
ALTER TABLE {{schema}}."{{prefix}}outbox_messages" ADD COLUMN group_limit integer;

-- One row per lock-held batch being published: the only trace of a batch whose relay dies,
-- since its row locks and every change of its transaction go with it. Written on a connection
-- of its own before the publish and deleted by the batch's settling statement, in the batch's
-- transaction, so it outlives exactly the batches that never settled. `lock_key` is a
-- transaction-level advisory lock the batch's transaction holds: a row whose key can be taken
-- belongs to a batch that is over. UNLOGGED: it is written once per batch and read only to
-- count crashes, so it skips the WAL and its commit waits for no flush; a server crash empties
-- it, which forgets one attempt of the rows in flight then (a server crash is not their doing).
CREATE UNLOGGED TABLE {{schema}}."{{prefix}}outbox_unsettled" (
    token      bytea       PRIMARY KEY,
    lock_key   bigint      NOT NULL,
    relay      text        NOT NULL,
    ids        bigint[]    NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now()
);
