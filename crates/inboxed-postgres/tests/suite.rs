//! The crate's integration tests, one module per concern, built as one test binary: a
//! binary per file linked the whole dependency tree again for each (forty-odd links in a
//! clean build of the workspace).

// A test fails by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod begin;
mod capabilities;
mod claim_plan;
mod compact_keys;
mod conformance;
#[cfg(feature = "diesel-async")]
mod conformance_diesel;
mod conformance_partitioned;
#[cfg(feature = "sea-orm")]
mod conformance_sea_orm;
#[cfg(feature = "tokio-postgres")]
mod conformance_tokio;
mod contention;
mod contract;
#[cfg(feature = "diesel-async")]
mod diesel_pg;
mod flush;
mod lag;
mod outage;
mod pace;
mod partitions;
mod pgbouncer;
mod pool;
mod purge_metrics;
mod receipt;
mod replication;
mod round_trips;
#[cfg(feature = "sea-orm")]
mod sea_orm_pg;
#[cfg(feature = "tokio-postgres")]
mod tokio_pg;
mod trace;
