//! MySQL and MariaDB store for [inboxed](https://docs.rs/inboxed): the inbox in the InnoDB
//! database that holds the business tables, MySQL 8.0.1+ or MariaDB 10.6+.
//!
//! Built so far: the store's pool (READ COMMITTED on every connection), the refusal of a
//! server that cannot keep the guarantee ([`MySqlStore::check_server`]), the classification
//! of MySQL's errors by number (in `inboxed-core`'s `mysql` feature), and the reading of the
//! engine's SQL files. The store operations come next, on the shared store layer.
//!
//! How InnoDB differs, and what this engine does about each difference:
//! - A duplicate is the error 1062 of a plain `INSERT`, never `INSERT IGNORE`, which turns
//!   every error into a warning: a too-long id would be cut, and a different message sharing
//!   the cut prefix taken for a duplicate. `ON DUPLICATE KEY UPDATE` cannot tell a new row from
//!   a duplicate through sqlx, which sets `CLIENT_FOUND_ROWS`.
//! - Keys are `VARBINARY`: the default collation makes `abc`, `AbC` and `AbC ` one key.
//! - A lock wait timeout (1205) rolls back only the statement that waited; the transaction
//!   must be rolled back whole, or its commit keeps the business change without its claim.
//! - There is no `UPDATE … RETURNING`: a claim stamps rows with its token, then selects them.
//!   An operation's SQL file may hold several statements for that, and keeps PostgreSQL's
//!   numbered placeholders (`$1`), which MySQL's `?` (one argument per use) cannot express.

mod queries;
#[allow(
    dead_code,
    reason = "the store operations of the next slice run it; this crate's tests do now"
)]
mod query;
#[allow(
    dead_code,
    reason = "the store operations of the next slice run it; this crate's tests do now"
)]
mod script;
mod store;
#[cfg(test)]
mod tests;

pub use query::MySqlQuery;
pub use store::{MySqlStore, Server, judge};
