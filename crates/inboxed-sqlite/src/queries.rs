//! SQL text for every store operation, one file per operation, rendered once per store.
//! File names match `Store` method names so a grep finds every backend's version.

use std::sync::Arc;

use inboxed_core::Namespace;
use inboxed_core::migration::Migration;

/// Migrations in order.
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    description: "inbox",
    sql: include_str!("../migrations/0001_inbox.sql"),
}];

/// Rendered SQL, shared by every clone of a store.
#[derive(Debug)]
pub(crate) struct Queries {
    pub(crate) claim: Arc<str>,
    pub(crate) lookup: Arc<str>,
    pub(crate) record_attempt: Arc<str>,
    pub(crate) clear_attempts: Arc<str>,
    pub(crate) dead_letter: Arc<str>,
    pub(crate) load_dead_letter: Arc<str>,
    pub(crate) delete_dead_letter: Arc<str>,
}

impl Queries {
    pub(crate) fn render(ns: &Namespace) -> Self {
        let r = |t: &str| Arc::<str>::from(ns.render(t));
        Self {
            claim: r(include_str!("../sql/claim.sql")),
            lookup: r(include_str!("../sql/lookup.sql")),
            record_attempt: r(include_str!("../sql/record_attempt.sql")),
            clear_attempts: r(include_str!("../sql/clear_attempts.sql")),
            dead_letter: r(include_str!("../sql/dead_letter.sql")),
            load_dead_letter: r(include_str!("../sql/load_dead_letter.sql")),
            delete_dead_letter: r(include_str!("../sql/delete_dead_letter.sql")),
        }
    }
}

/// Durability settings query; has no identifiers to render.
pub(crate) const CHECK_DURABILITY: &str = include_str!("../sql/check_durability.sql");
