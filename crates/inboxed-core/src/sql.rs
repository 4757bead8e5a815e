//! The set of SQL templates a backend provides, one per store operation, and their rendering
//! for a namespace. The SQL text itself lives in each backend's `sql/*.sql` files; this only
//! names the operations, so that every backend provides the same set.

use std::sync::Arc;

use crate::namespace::Namespace;

/// Declares [`Templates`] and [`Queries`] from one list of operation names, so that adding an
/// operation cannot leave one of them behind.
macro_rules! operations {
    ($($name:ident),* $(,)?) => {
        /// A backend's SQL templates, one per store operation (file `sql/<field>.sql`; an
        /// empty string for an operation the backend does not support).
        #[derive(Debug, Clone, Copy)]
        #[allow(missing_docs, reason = "each field is the file of that name")]
        pub struct Templates {
            $(pub $name: &'static str,)*
        }

        /// The templates with the namespace substituted, rendered once per store.
        #[derive(Debug)]
        #[allow(missing_docs, reason = "each field is the rendered template of that name")]
        pub struct Queries {
            $(pub $name: Arc<str>,)*
        }

        impl Queries {
            /// Substitutes the namespace into every template, with `{{processed}}` naming the
            /// plain processed-messages table.
            #[must_use]
            pub fn render(t: &Templates, ns: &Namespace) -> Self {
                Self::render_for(t, ns, PROCESSED_PLAIN)
            }

            /// Like [`Queries::render`], with `{{processed}}` naming `processed`: the plain
            /// table, or [`PROCESSED_PARTITIONED`] in time-partitioned mode.
            #[must_use]
            pub fn render_for(t: &Templates, ns: &Namespace, processed: &str) -> Self {
                let r = |sql: &str| Arc::from(ns.render(&sql.replace("{{processed}}", processed)));
                Self {
                    $($name: r(t.$name),)*
                }
            }

            /// Every rendered query with its operation's name, for checks over all of them.
            #[must_use]
            pub fn named(&self) -> Vec<(&'static str, &str)> {
                vec![$((stringify!($name), &*self.$name),)*]
            }
        }
    };
}

/// An engine's [`Templates`]: for each operation named, the file `sql/<operation>.sql` of the
/// crate that invokes it; after `absent:`, the operations the engine does not provide (an
/// empty statement). The compiler checks that every operation is named, and once.
///
/// ```ignore
/// pub(crate) const TEMPLATES: Templates = inboxed_core::templates! {
///     claim, lookup, enqueue, /* … */
///     absent: claim_many, lock_batch, /* … */
/// };
/// ```
#[macro_export]
macro_rules! templates {
    ($($name:ident),* $(,)? ; absent: $($none:ident),* $(,)?) => {
        $crate::sql::Templates {
            $($name: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"), "/sql/", stringify!($name), ".sql"
            )),)*
            $($none: "",)*
        }
    };
}

/// The processed-messages table (after the prefix): one row per key, unique key constraint.
pub const PROCESSED_PLAIN: &str = "processed_messages";
/// Its time-partitioned counterpart (PostgreSQL), deduplicated by a key lock and a probe.
pub const PROCESSED_PARTITIONED: &str = "processed_log";

operations!(
    claim,
    register_consumer,
    lookup,
    record_attempt,
    record_attempts,
    forgive,
    load_attempts,
    clear_attempts,
    claim_many,
    clear_many_attempts,
    dead_letter,
    load_dead_letter,
    delete_dead_letter,
    enqueue,
    enqueue_lookup,
    enqueue_many,
    enqueue_many_new,
    enqueue_lookup_many,
    notify,
    claim_batch,
    claim_stamp,
    complete,
    complete_batch,
    fail,
    extend_leases,
    release,
    release_stale,
    register_worker,
    dead_workers,
    forget_workers,
    count_workers,
    gate_enter,
    gate_leave,
    replay_select,
    replay_reset,
    replay_audit,
    purge_done,
    observe_inbox,
    observe_dead_letters,
    observe_switches,
    switch_open,
    switch_close,
    list_dead_letters,
    load_dead_letter_by_id,
    delete_dead_letter_by_id,
    list_partitions,
    lock_batch,
    count_attempts,
    finish_locked,
    purge_processed,
    count_expired,
    processed_stats,
    lock_key,
    dead_letter_lock,
    claim_partitioned,
    create_partitions,
    expired_partitions,
    partition_consumers,
    purge_untimed,
    lock_maintenance,
    purge_dead_letters,
    purge_redrive_audit,
    redact_done_payloads,
    server_version,
    detach_partition,
    drop_partition,
    migrate_lock,
    migrate_unlock,
    schema_exists,
    create_schema,
    migrations_table,
    migrations_applied,
    migration_record,
    migrations_exist,
    outbox_write,
    outbox_write_many,
    outbox_claim,
    outbox_claim_stamp,
    outbox_sent,
    outbox_delete_sent,
    outbox_fail,
    outbox_release_stale,
    outbox_release,
    outbox_purge_sent,
    outbox_list,
    outbox_browse,
    outbox_load,
    outbox_select_dead,
    outbox_retry,
    outbox_discard,
    outbox_audit,
    observe_outbox,
    outbox_lock,
    outbox_lock_plan,
    outbox_hold,
    outbox_mark,
    outbox_reap_unmarked,
    letters_select,
    letters_delete,
    letters_audit,
    rows_list,
    row_load,
    audit_list,
    rows_by_key,
);
