//! The crate's integration tests, one module per concern, built as one test binary: a
//! binary per file linked the whole dependency tree again for each (forty-odd links in a
//! clean build of the workspace).

// A test fails by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod acks;
mod ambiguous_commit;
mod chain;
mod chaos;
mod cluster;
mod failover;
mod failover_workers;
mod hosts;
mod ladder;
mod outage;
mod outbox;
mod pg_restart;
mod poison;
mod rabbitmq;
mod restart;
mod tenants;
mod tls;
mod wire;
