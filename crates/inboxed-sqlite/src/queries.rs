//! The SQLite SQL files, one per store operation; file names match the `Store` method names
//! so that a grep finds every backend's version. This is the only place SQL text enters Rust.

use inboxed_core::migration::Migration;
use inboxed_core::sql::Templates;

/// Migrations in order; the same numbering in every backend.
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    description: "inbox",
    sql: include_str!("../migrations/0001_inbox.sql"),
}];

/// One template per store operation.
pub(crate) const TEMPLATES: Templates = Templates {
    claim: include_str!("../sql/claim.sql"),
    lookup: include_str!("../sql/lookup.sql"),
    record_attempt: include_str!("../sql/record_attempt.sql"),
    clear_attempts: include_str!("../sql/clear_attempts.sql"),
    dead_letter: include_str!("../sql/dead_letter.sql"),
    load_dead_letter: include_str!("../sql/load_dead_letter.sql"),
    delete_dead_letter: include_str!("../sql/delete_dead_letter.sql"),
};

/// Durability settings query; has no identifiers to render.
pub(crate) const CHECK_DURABILITY: &str = include_str!("../sql/check_durability.sql");
