//! PostgreSQL store for [inboxed](https://docs.rs/inboxed).
//!
//! The claim is `INSERT … ON CONFLICT DO NOTHING` on the primary key
//! `(consumer_name, message_id)`, decided by rows affected, inside the transaction that the
//! handler writes through. SQL lives in `sql/*.sql` and `migrations/*.sql` beside this crate,
//! one file per operation, each opening with a comment on its parameters and why it is written
//! so.

mod capabilities;
mod claim;
mod common;
#[cfg(feature = "diesel-async")]
pub mod diesel_pg;
mod engine;
pub mod failover;
mod inbox;
mod inline;
mod key;
#[doc(hidden)] // public for the crate's tests only
pub mod key_lock;
mod partition_list;
mod partitions;
mod queries;
mod retention;
#[cfg(feature = "sea-orm")]
pub mod sea_orm_pg;
mod standbys;
mod store;
#[cfg(any(
    feature = "tokio-postgres",
    feature = "diesel-async",
    feature = "sea-orm"
))]
mod stores;
#[cfg(feature = "tokio-postgres")]
pub mod tokio_pg;

pub use key::message_key;
pub use partition_list::{ExpiryPlan, PartitionInfo};
pub use store::PgStore;

/// Schema `public`, prefix `inboxed_`.
#[must_use]
pub fn default_namespace() -> inboxed_core::Namespace {
    match inboxed_core::Namespace::new("public", "inboxed_") {
        Ok(ns) => ns,
        Err(_) => unreachable!("the default namespace is valid"),
    }
}
