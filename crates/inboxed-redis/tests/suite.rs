//! The crate's integration tests, one module per concern, built as one test binary: a
//! binary per file linked the whole dependency tree again for each (forty-odd links in a
//! clean build of the workspace).

// A test fails by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod chain;
mod outage;
mod outbox;
mod redis;
mod tls;
mod wire;
