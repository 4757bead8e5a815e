//! Test support for inboxed: throwaway databases on the real engines, a scripted ledger
//! handler, barrier hooks, a child-process crash harness, and the conformance suite.
//!
//! Internal to the workspace and not semver: it changes with the engine it tests.

// A harness fails its test by panicking; there is no caller to hand an error to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod amqp;
pub mod backend;
pub mod broker_child;
pub mod chain;
pub mod child;
pub mod commit_cut;
pub mod conformance;
pub mod diesel_pg;
pub mod handler;
pub use inboxed_testkit::hooks;
pub mod lite;
pub mod my;
pub mod my_parted;
pub mod nats;
pub mod netns;
pub mod outage;
pub mod outbox;
pub mod parted;
pub mod pg;
pub mod pipeline;
pub mod rabbit_node;
pub mod raw_amqp;
pub mod raw_kafka;
pub mod raw_nats;
pub mod restart;
pub mod sea_orm_pg;
pub mod tap;
pub mod throwaway;
pub mod tls;
pub mod tokio_pg;
pub mod traces;
pub mod wire;

pub use backend::{Backend, TestDb};
pub use diesel_pg::DieselPg;
pub use handler::{Ledger, Script, SecondConnection, credit};
pub use lite::Lite;
pub use my::My;
pub use my_parted::MyParted;
pub use parted::PgParted;
pub use pg::{Pg, admin_url};
pub use sea_orm_pg::SeaOrmPg;
pub use tokio_pg::TokioPg;

/// Asserts that `envelope` carries when its broker took it, a moment ago (a minute at most):
/// the broker's own timestamp, read by its adapter.
///
/// # Panics
/// When it has none, or another.
pub fn assert_sent_recently(envelope: &inboxed_core::Envelope) {
    let sent = envelope.sent_at().expect("the broker's timestamp");
    let age = sent.elapsed().unwrap_or_default();
    assert!(age < std::time::Duration::from_secs(60), "sent {age:?} ago");
}

/// A TCP port free on the loopback interface now, for a server a test starts.
///
/// # Panics
/// When no port can be bound.
#[must_use]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The libtest name of the test function `name` in the module at `module_path` (what
/// `module_path!()` gives there): the path without the test binary's own crate name. Crash
/// cases start their own test binary again as a child that runs only this test (`--exact`),
/// and each crate's integration tests are one binary of several modules.
#[must_use]
pub fn libtest_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

/// [`libtest_name`] of the test function `name` in the calling module.
#[macro_export]
macro_rules! test_name {
    ($name:expr) => {
        $crate::libtest_name(::std::module_path!(), $name)
    };
}
