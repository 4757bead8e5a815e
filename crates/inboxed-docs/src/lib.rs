//! Every Rust block of the project's prose, compiled: `cargo test -p inboxed-docs --doc`.
//!
//! A page's blocks are doctests of the module named after it. Each block is a whole program
//! or a whole item (a function that takes what it needs as parameters), so that what a reader
//! copies is what compiles here; a block marked `no_run` talks to servers, and one marked
//! `ignore` says beside it why it cannot compile. The modules exist only under `cfg(doctest)`:
//! they are not documentation of this crate.

/// README.md.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub mod readme {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/adapters.md")]
pub mod adapters {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/deployments.md")]
pub mod deployments {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/drivers.md")]
pub mod drivers {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/failures.md")]
pub mod failures {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guarantees.md")]
pub mod guarantees {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/inbox-contract.md")]
pub mod inbox_contract {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/key-format.md")]
pub mod key_format {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/metrics.md")]
pub mod metrics {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/observability.md")]
pub mod observability {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/operations.md")]
pub mod operations {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/outbox.md")]
pub mod outbox {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/relay.md")]
pub mod relay {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/retention.md")]
pub mod retention {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/runbooks.md")]
pub mod runbooks {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/store-then-process.md")]
pub mod store_then_process {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/testing-your-handlers.md")]
pub mod testing_your_handlers {}
