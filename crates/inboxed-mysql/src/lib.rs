//! MySQL and MariaDB store for [inboxed](https://docs.rs/inboxed): the inbox in the InnoDB
//! database that holds the business tables, MySQL 8.0.16+ or MariaDB 10.6+.
//!
//! Built so far: the processor (the idempotent consumer, one message or a batch per
//! transaction, with attempts, dead letters and redrive) and store-then-process in lease and
//! lock-held modes (receipt, claims, fenced completion, failures, heartbeats, release, the reaper, replay, the
//! purge of done rows), retention of processed keys, dead letters and the audit, and the
//! operator's reads, on the shared store layer, passing their guarantee suites on MariaDB;
//! migrations serialised by a named lock; the refusal of a server that cannot keep the
//! guarantee ([`MySqlStore::check_server`]); MySQL's errors classified by number
//! (`inboxed-core`'s `mysql` feature); workers' and lock-held relay batches' liveness through
//! named locks (`GET_LOCK`); time partitions of the processed keys by the time in their
//! UUIDv7 ids ([`MySqlStore::partitioned`]).
//!
//! How InnoDB differs, and what this engine does about each difference:
//! - A duplicate is the error 1062 of a plain `INSERT`, never `INSERT IGNORE`, which turns
//!   every error into a warning: a too-long id would be cut, and a different message sharing
//!   the cut prefix taken for a duplicate. `ON DUPLICATE KEY UPDATE` cannot tell a new row from
//!   a duplicate through sqlx, which sets `CLIENT_FOUND_ROWS`.
//! - Keys are `VARBINARY`: the default collation makes `abc`, `AbC` and `AbC ` one key.
//! - A lock wait timeout (1205) rolls back only the statement that waited; the transaction
//!   must be rolled back whole, or its commit keeps the business change without its claim.
//! - There is no `UPDATE … RETURNING`: an operation locks and reads its rows, then changes them
//!   (the directive `--! rows` marks the statement whose rows it returns), or a claim selects
//!   its rows and stamps them by id (`claim_stamp.sql`). An operation's SQL file may hold
//!   several statements for that (run in one transaction when the operation runs alone), and
//!   keeps PostgreSQL's numbered placeholders (`$1`), which MySQL's `?` (one argument per use)
//!   cannot express.
//! - An `UPDATE` locks every row its subqueries read, and `id IN (SELECT … FROM JSON_TABLE …)`
//!   is planned as a scan of the whole table: statements reach rows by primary key from the
//!   list (`STRAIGHT_JOIN`) or through the claim token's index, so they lock only their own.
//! - DDL commits on its own, so migrations are written to be applied again after a crash
//!   halfway, and migrators take turns on a named lock that outlives those commits.
//! - There is no `SET LOCAL`: the store sets its lock, statement and idle bounds on the session
//!   as each of its transactions begins, and a connection returning to the pool gets the
//!   server's defaults back ([`MySqlStore::pool_options`]).

mod claim;
mod engine;
mod gate;
mod inbox;
mod outbox;
mod partitions;
mod parts;
mod queries;
mod query;
mod receipt;
mod retention;
mod script;
mod server;
mod store;
#[cfg(test)]
mod tests;

pub use partitions::Partition;
pub use query::MySqlQuery;
pub use server::{Server, judge};
pub use store::MySqlStore;
