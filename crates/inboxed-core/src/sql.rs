//! The set of SQL templates a backend provides, one per store operation, and their rendering
//! for a namespace. The SQL text itself lives in each backend's `sql/*.sql` files; this only
//! names the operations, so that every backend provides the same set.

use std::sync::Arc;

use crate::namespace::Namespace;

/// A backend's SQL templates, one per store operation (file `sql/<field>.sql`).
#[derive(Debug, Clone, Copy)]
pub struct Templates {
    /// `claim.sql`
    pub claim: &'static str,
    /// `lookup.sql`
    pub lookup: &'static str,
    /// `record_attempt.sql`
    pub record_attempt: &'static str,
    /// `clear_attempts.sql`
    pub clear_attempts: &'static str,
    /// `dead_letter.sql`
    pub dead_letter: &'static str,
    /// `load_dead_letter.sql`
    pub load_dead_letter: &'static str,
    /// `delete_dead_letter.sql`
    pub delete_dead_letter: &'static str,
}

/// The templates rendered once for a namespace, shared by every clone of a store.
#[derive(Debug)]
#[allow(
    missing_docs,
    reason = "each field is the rendered form of the template of that name"
)]
pub struct Queries {
    pub claim: Arc<str>,
    pub lookup: Arc<str>,
    pub record_attempt: Arc<str>,
    pub clear_attempts: Arc<str>,
    pub dead_letter: Arc<str>,
    pub load_dead_letter: Arc<str>,
    pub delete_dead_letter: Arc<str>,
}

impl Queries {
    /// Substitutes the namespace into every template.
    #[must_use]
    pub fn render(t: &Templates, ns: &Namespace) -> Self {
        let r = |sql: &str| Arc::<str>::from(ns.render(sql));
        Self {
            claim: r(t.claim),
            lookup: r(t.lookup),
            record_attempt: r(t.record_attempt),
            clear_attempts: r(t.clear_attempts),
            dead_letter: r(t.dead_letter),
            load_dead_letter: r(t.load_dead_letter),
            delete_dead_letter: r(t.delete_dead_letter),
        }
    }
}
