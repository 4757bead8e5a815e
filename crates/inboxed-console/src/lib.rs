//! The operator's console: what is stuck, and where, without writing SQL. The consumers'
//! backlog (pending, claimed, dead, the oldest waiting, expired leases, parked aggregates), the
//! dead letters by consumer and reason, the outbox's backlog; the rows, the dead letters and
//! the outbox's rows listed, searched and shown in full; the audit trail.
//!
//! It is an axum [`Router`]: `inboxed serve` serves it, and an application nests
//! it under a path of its own, as River UI and Oban Web are mounted (where each tenant has a
//! database of its own, [`TenantConsoles`] serves one console per tenant and an index of
//! them):
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
//! Nobody gets in by default: configure [`ConsoleConfig::users`] (HTTP Basic with a user's
//! name and token, or the token as a bearer token), each read-only or an operator, or an
//! [`ConsoleConfig::anonymous`] role for a console behind an authenticating proxy. Operators
//! act on dead letters, rows and dead outbox rows (one, or all that match the filter, after a confirmation that
//! states how many), through the library's own operations, each audited with who, when, why
//! and the filter. Every page escapes what it shows (ids, errors and payloads come from
//! producers), runs no script but its own, and shows payloads only where
//! [`ConsoleConfig::show_payloads`] and the user allow.

mod access;
mod actions;
mod assets;
mod audit;
mod dead_letters;
mod forms;
mod layout;
mod outbox;
mod overview;
mod rows;
mod store;
mod tenants;

use std::sync::Arc;

use axum::Router;
use axum::routing::get;

pub use access::{AccessError, ConsoleUser, Role, SHORTEST_TOKEN};
pub use inboxed_core::metrics::DedupRate;
pub use store::ConsoleStore;
pub use tenants::{TenantConsoles, TenantError, check_tenant_name};

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
    /// Who may sign in, and as what. Defaults to none.
    pub users: Vec<ConsoleUser>,
    /// The role of a request without credentials; `None` asks for them (401). Set it only
    /// where something in front of the console has authenticated the request, or for a
    /// console on a loopback address of a machine you trust. Defaults to `None`.
    pub anonymous: Option<Role>,
    /// Consumers whose processed keys the overview shows besides those it finds with rows or
    /// dead letters (a consumer whose processor reads a broker has neither while all is well).
    /// Defaults to none.
    pub consumers: Vec<String>,
    /// The host names the console answers to (the `Host` header without its port); any other
    /// gets 421. A console open without credentials on a loopback address should list only
    /// loopback names (`127.0.0.1`, `localhost`, `[::1]`): a page of another site whose name
    /// is rebound to 127.0.0.1 (DNS rebinding) then reads nothing. Empty: any host. Defaults to
    /// empty.
    pub hosts: Vec<String>,
    /// The tenant whose console this is, when [`TenantConsoles`] made it.
    pub(crate) tenant: Option<tenants::TenantPlace>,
}

impl ConsoleConfig {
    /// The rows a list reads: [`ConsoleConfig::page_rows`] within 1 ..= 1,000.
    pub(crate) fn list_limit(&self) -> u32 {
        self.page_rows.clamp(1, 1000)
    }

    /// Sets [`ConsoleConfig::prefix`].
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets [`ConsoleConfig::page_rows`].
    #[must_use]
    pub fn page_rows(mut self, page_rows: u32) -> Self {
        self.page_rows = page_rows;
        self
    }

    /// Sets [`ConsoleConfig::show_payloads`].
    #[must_use]
    pub fn show_payloads(mut self, show_payloads: bool) -> Self {
        self.show_payloads = show_payloads;
        self
    }

    /// Sets [`ConsoleConfig::payload_bytes`].
    #[must_use]
    pub fn payload_bytes(mut self, payload_bytes: usize) -> Self {
        self.payload_bytes = payload_bytes;
        self
    }

    /// Sets [`ConsoleConfig::users`].
    #[must_use]
    pub fn users(mut self, users: Vec<ConsoleUser>) -> Self {
        self.users = users;
        self
    }

    /// Sets [`ConsoleConfig::anonymous`].
    #[must_use]
    pub fn anonymous(mut self, anonymous: Option<Role>) -> Self {
        self.anonymous = anonymous;
        self
    }

    /// Sets [`ConsoleConfig::consumers`].
    #[must_use]
    pub fn consumers(mut self, consumers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.consumers = consumers.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`ConsoleConfig::hosts`].
    #[must_use]
    pub fn hosts(mut self, hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.hosts = hosts.into_iter().map(Into::into).collect();
        self
    }
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            prefix: String::new(),
            page_rows: 100,
            show_payloads: false,
            payload_bytes: 64 * 1024,
            users: Vec::new(),
            anonymous: None,
            consumers: Vec::new(),
            hosts: Vec::new(),
            tenant: None,
        }
    }
}

/// The console of one database.
#[derive(Clone)]
pub struct Console<S> {
    store: S,
    config: ConsoleConfig,
    csrf: access::CsrfKey,
}

impl<S> std::fmt::Debug for Console<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S: ConsoleStore> Console<S> {
    /// The console of `store`, with the default [`ConsoleConfig`].
    pub fn new(store: S) -> Self {
        Self {
            store,
            config: ConsoleConfig::default(),
            csrf: access::CsrfKey::random(),
        }
    }

    /// Replaces the [`ConsoleConfig`].
    #[must_use]
    pub fn with_config(mut self, config: ConsoleConfig) -> Self {
        self.config = config;
        self
    }

    /// The pages: `/` (the overview), `/dead-letters` (filtered by `consumer`, `reason`,
    /// `type`, `error`, `message_id`, `within` in the query string) and `/dead-letters/{id}`,
    /// `/rows` (by `consumer`, `status`, `aggregate`, `message_id`, `within`, `payload`,
    /// `json`) and `/rows/{id}`, `/outbox` (by `status`, `destination`, `key`, `message_id`,
    /// `within`, `payload`, `json`) and `/outbox/{id}`, `/audit`; the actions' confirmations
    /// and their POSTs at `/dead-letters/act`, `/rows/replay` and `/outbox/act`. Every route
    /// asks for credentials first.
    pub fn router(self) -> Router {
        let state = Arc::new(self);
        Router::new()
            .route("/", get(overview::show::<S>))
            .route("/dead-letters", get(dead_letters::list::<S>))
            .route("/dead-letters/{id}", get(dead_letters::one::<S>))
            .route(
                "/dead-letters/act",
                get(actions::letters::confirm::<S>).post(actions::letters::act::<S>),
            )
            .route("/rows", get(rows::list::<S>))
            .route("/rows/{id}", get(rows::one::<S>))
            .route(
                "/rows/replay",
                get(actions::replay::confirm::<S>).post(actions::replay::replay::<S>),
            )
            .route("/outbox", get(outbox::list::<S>))
            .route("/outbox/{id}", get(outbox::one::<S>))
            .route(
                "/outbox/act",
                get(actions::outbox::confirm::<S>).post(actions::outbox::act::<S>),
            )
            .route("/audit", get(audit::list::<S>))
            .route("/assets/console.js", get(assets::script))
            .layer(axum::middleware::from_fn_with_state(
                Arc::new(state.config.clone()),
                access::authenticate,
            ))
            .with_state(state)
    }
}
