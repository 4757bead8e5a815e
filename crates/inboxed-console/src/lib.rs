//! The operator's console: what is stuck, and where, without writing SQL. The consumers'
//! backlog (pending, claimed, dead, the oldest waiting, expired leases, parked aggregates), the
//! dead letters by consumer and reason, the outbox's backlog; the dead letters listed and
//! filtered, and each one in full.
//!
//! It is an axum [`Router`]: `inboxed serve` serves it, and an application nests
//! it under a path of its own, as River UI and Oban Web are mounted:
//!
//! ```no_run
//! # async fn example(store: inboxed_sqlite::SqliteStore) {
//! use inboxed_console::{Console, ConsoleConfig};
//!
//! let mut config = ConsoleConfig::default();
//! config.prefix = "/inboxed".to_owned();
//! let app = axum::Router::new().nest("/inboxed", Console::new(store).with_config(config).router());
//! # let _ = app;
//! # }
//! ```
//!
//! This version reads only: it has no action, and nothing in it changes a row. Every page
//! escapes what it shows (ids, errors and payloads come from producers), and payloads are
//! hidden unless [`ConsoleConfig::show_payloads`] says otherwise.

mod dead_letters;
mod layout;
mod overview;
mod store;

use std::sync::Arc;

use axum::Router;
use axum::routing::get;

pub use store::ConsoleStore;

/// How the console shows what it reads. Every field says its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsoleConfig {
    /// The path the router is nested under, for the links between pages (`/inboxed` for
    /// `Router::nest("/inboxed", …)`, whose overview is then `/inboxed`). Defaults to `""`:
    /// served at the root.
    pub prefix: String,
    /// Rows a list shows at most, newest first; a filter narrows them, and a page never reads
    /// more than this many. Capped at 1,000. Defaults to 100.
    pub page_rows: u32,
    /// Whether a dead letter's page shows its payload (JSON when it parses, hex otherwise, cut
    /// at [`ConsoleConfig::payload_bytes`]). Payloads may hold personal data. Defaults to
    /// `false`.
    pub show_payloads: bool,
    /// The most of a payload a page shows. Defaults to 64 KiB.
    pub payload_bytes: usize,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            prefix: String::new(),
            page_rows: 100,
            show_payloads: false,
            payload_bytes: 64 * 1024,
        }
    }
}

/// The console of one database.
#[derive(Debug, Clone)]
pub struct Console<S> {
    store: S,
    config: ConsoleConfig,
}

impl<S: ConsoleStore> Console<S> {
    /// The console of `store`, with the default [`ConsoleConfig`].
    pub fn new(store: S) -> Self {
        Self {
            store,
            config: ConsoleConfig::default(),
        }
    }

    /// Replaces the [`ConsoleConfig`].
    #[must_use]
    pub fn with_config(mut self, config: ConsoleConfig) -> Self {
        self.config = config;
        self
    }

    /// The pages: `/` (the overview), `/dead-letters` (filtered by `consumer`, `reason`,
    /// `type`, `error` in the query string) and `/dead-letters/{id}`.
    pub fn router(self) -> Router {
        Router::new()
            .route("/", get(overview::show::<S>))
            .route("/dead-letters", get(dead_letters::list::<S>))
            .route("/dead-letters/{id}", get(dead_letters::one::<S>))
            .with_state(Arc::new(self))
    }
}
