//! The PostgreSQL SQL files, one per store operation (`sql/<operation>.sql`), and the
//! migrations (`migrations/`); file names match the operations, so that a grep finds every
//! engine's version. This is the only place SQL text enters Rust.

use inboxed_core::migration::Migration;
use inboxed_core::sql::Templates;

/// Migrations in order; the same numbering in every engine.
pub(crate) const MIGRATIONS: &[Migration] = inboxed_core::migrations!();

/// One template per store operation.
pub(crate) const TEMPLATES: Templates = inboxed_core::templates! {
    claim, register_consumer, lookup, record_attempt, record_attempts, forgive, load_attempts,
    clear_attempts, claim_many, clear_many_attempts, dead_letter, load_dead_letter,
    delete_dead_letter, enqueue, enqueue_lookup, enqueue_many, enqueue_many_new,
    enqueue_lookup_many, notify,
    claim_batch, complete, complete_batch, fail, extend_leases, release, release_stale,
    register_worker, dead_workers, forget_workers, count_workers, replay_select, replay_reset,
    replay_audit, purge_done, observe_inbox, observe_dead_letters, list_dead_letters,
    load_dead_letter_by_id, delete_dead_letter_by_id, list_partitions, lock_batch,
    count_attempts, finish_locked, purge_processed, count_expired, processed_stats,
    purge_dead_letters, purge_redrive_audit, redact_done_payloads, server_version, lock_key, dead_letter_lock,
    claim_partitioned, create_partitions, expired_partitions, partition_consumers,
    lock_maintenance, detach_partition, drop_partition, migrate_lock, schema_exists,
    create_schema, migrations_table, migrations_applied, migration_record, migrations_exist,
    outbox_write, outbox_write_many, outbox_claim, outbox_sent, outbox_delete_sent, outbox_fail,
    outbox_release_stale, outbox_release, outbox_purge_sent, outbox_list, outbox_browse, outbox_load,
    outbox_select_dead, outbox_retry, outbox_discard, outbox_audit, observe_outbox,
    switch_open, switch_close, observe_switches, outbox_lock,
    outbox_lock_plan, outbox_hold, outbox_mark, outbox_reap_unmarked,
    letters_select, letters_delete, letters_audit, rows_list, row_load, audit_list, rows_by_key;
    absent:
    // No batch gate: 16 default workers drain at 0.96 of one worker's rate without one
    // (docs/bench/runs.md, `defaults`).
    gate_enter, gate_leave,
    // Partitioned mode partitions by receipt time here: every key is in a time partition.
    purge_untimed,
    // UPDATE … RETURNING claims and stamps in one statement (claim_batch.sql,
    // outbox_claim.sql).
    claim_stamp, outbox_claim_stamp,
    // The advisory lock is the transaction's own: it ends with the migration run's commit.
    migrate_unlock,
};
/// Durability settings query; has no identifiers to render.
pub(crate) const CHECK_DURABILITY: &str = include_str!("../sql/check_durability.sql");

#[cfg(test)]
mod tests {
    use inboxed_core::sql::{PROCESSED_PARTITIONED, Queries};

    use super::TEMPLATES;

    /// In partitioned mode every statement on processed keys must reach the partitioned
    /// table: one that still named the plain table would read or write keys the claim never
    /// sees. Only the plain claim (never run in that mode) may name it.
    #[test]
    fn partitioned_queries_never_name_the_plain_table() {
        let ns = crate::default_namespace();
        let parted = Queries::render_for(&TEMPLATES, &ns, PROCESSED_PARTITIONED);
        for (name, sql) in parted.named() {
            if name != "claim" && name != "claim_many" {
                assert!(
                    !sql.contains("processed_messages"),
                    "{name} names the plain table"
                );
            }
            assert!(!sql.contains("{{processed}}"), "{name} left a placeholder");
        }
        let plain = Queries::render(&TEMPLATES, &ns);
        let lookup = plain.named().into_iter().find(|(n, _)| *n == "lookup");
        assert!(lookup.is_some_and(|(_, sql)| sql.contains("\"inboxed_processed_messages\"")));
    }
}
