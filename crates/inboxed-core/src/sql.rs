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
    /// `enqueue.sql`
    pub enqueue: &'static str,
    /// `enqueue_lookup.sql`
    pub enqueue_lookup: &'static str,
    /// `notify.sql`
    pub notify: &'static str,
    /// `claim_batch.sql`
    pub claim_batch: &'static str,
    /// `complete.sql`
    pub complete: &'static str,
    /// `complete_batch.sql`
    pub complete_batch: &'static str,
    /// `fail.sql`
    pub fail: &'static str,
    /// `extend_leases.sql`
    pub extend_leases: &'static str,
    /// `release.sql`
    pub release: &'static str,
    /// `release_stale.sql`
    pub release_stale: &'static str,
    /// `replay_select.sql`
    pub replay_select: &'static str,
    /// `replay_reset.sql`
    pub replay_reset: &'static str,
    /// `replay_audit.sql`
    pub replay_audit: &'static str,
    /// `purge_done.sql`
    pub purge_done: &'static str,
    /// `lock_batch.sql` (PostgreSQL only; empty elsewhere)
    pub lock_batch: &'static str,
    /// `count_attempts.sql` (PostgreSQL only; empty elsewhere)
    pub count_attempts: &'static str,
    /// `finish_locked.sql` (PostgreSQL only; empty elsewhere)
    pub finish_locked: &'static str,
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
    pub enqueue: Arc<str>,
    pub enqueue_lookup: Arc<str>,
    pub notify: Arc<str>,
    pub claim_batch: Arc<str>,
    pub complete: Arc<str>,
    pub complete_batch: Arc<str>,
    pub fail: Arc<str>,
    pub extend_leases: Arc<str>,
    pub release: Arc<str>,
    pub release_stale: Arc<str>,
    pub replay_select: Arc<str>,
    pub replay_reset: Arc<str>,
    pub replay_audit: Arc<str>,
    pub purge_done: Arc<str>,
    pub lock_batch: Arc<str>,
    pub count_attempts: Arc<str>,
    pub finish_locked: Arc<str>,
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
            enqueue: r(t.enqueue),
            enqueue_lookup: r(t.enqueue_lookup),
            notify: r(t.notify),
            claim_batch: r(t.claim_batch),
            complete: r(t.complete),
            complete_batch: r(t.complete_batch),
            fail: r(t.fail),
            extend_leases: r(t.extend_leases),
            release: r(t.release),
            release_stale: r(t.release_stale),
            replay_select: r(t.replay_select),
            replay_reset: r(t.replay_reset),
            replay_audit: r(t.replay_audit),
            purge_done: r(t.purge_done),
            lock_batch: r(t.lock_batch),
            count_attempts: r(t.count_attempts),
            finish_locked: r(t.finish_locked),
        }
    }
}
