-- The billing service's tables: balances, and one row per charge applied (the ledger its
-- tests audit: a charge applied twice shows as two rows of one message id).
CREATE TABLE IF NOT EXISTS accounts (id text PRIMARY KEY, balance bigint NOT NULL);
CREATE TABLE IF NOT EXISTS charges (
    message_id text NOT NULL,
    account text NOT NULL,
    cents bigint NOT NULL
);
