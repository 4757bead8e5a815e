-- 0010: contract version 3 (docs/inbox-contract.md): quick recovery after a worker dies.
-- Same template rules as 0001.
--
-- group_limit: the most rows this row may be claimed with, set by the reaper when a claim
-- holding it died: half the rows that claim still held (which of them killed it, if any, is
-- unknown, so none is charged an attempt), or 1 when it held this row alone (then the row is
-- charged). Halving each time a group dies corners a message that kills its worker in about
-- log2(batch size) deaths while its batch-mates go on in large groups. NULL: no limit.
ALTER TABLE {{schema}}."{{prefix}}inbox_messages" ADD COLUMN group_limit integer;

-- Workers that hold a session advisory lock on (lock_class, lock_key) for as long as they
-- run, on a connection of their own (the two-integer form: its keys never meet the one-bigint
-- keys that receipts and the maintenance lock take). A registered worker whose lock is free has died (its connection
-- closed with its process), so the reaper returns its rows at its next pass instead of after
-- their lease. A worker that is not registered (one in another language, a run_once loop, one
-- behind a transaction-pooling PgBouncer) is judged by its leases alone.
CREATE TABLE {{schema}}."{{prefix}}workers" (
    -- claimed_by of the rows it claims
    id         text        PRIMARY KEY,
    lock_class integer     NOT NULL,
    lock_key   integer     NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE {{schema}}."{{prefix}}inbox_messages" IS 'inboxed inbox contract v3';
