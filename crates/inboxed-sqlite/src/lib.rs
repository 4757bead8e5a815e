//! SQLite store for [inboxed](https://docs.rs/inboxed): the inbox in an embedded file, no server.
//!
//! Writers serialize at `BEGIN IMMEDIATE`; the claim is `INSERT … ON CONFLICT DO NOTHING
//! RETURNING`, decided by whether a row comes back. SQL lives in `sql/*.sql` and
//! `migrations/*.sql` beside this crate, with the same file names as the PostgreSQL backend.

mod engine;
mod inbox;
mod queries;
mod store;

pub use store::SqliteStore;

/// Database `main`, prefix `inboxed_`.
#[must_use]
pub fn default_namespace() -> inboxed_core::Namespace {
    match inboxed_core::Namespace::new("main", "inboxed_") {
        Ok(ns) => ns,
        Err(_) => unreachable!("the default namespace is valid"),
    }
}
