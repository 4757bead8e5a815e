//! The crate's integration tests, one module per concern, built as one test binary: a
//! binary per file linked the whole dependency tree again for each (forty-odd links in a
//! clean build of the workspace).

// A test fails by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod browser;
mod cli;
mod common;
mod daemon;
mod dedup_rate;
mod operator;
mod outbox_relay;
mod partitions;
mod redrive;
mod relay;
mod secrets;
mod serve;
mod tenants;
mod tls;
