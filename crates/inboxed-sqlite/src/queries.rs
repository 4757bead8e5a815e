//! The SQLite SQL files, one per store operation (`sql/<operation>.sql`), and the migrations
//! (`migrations/`); file names match the operations, so that a grep finds every engine's
//! version. This is the only place SQL text enters Rust.

use inboxed_core::migration::Migration;
use inboxed_core::sql::Templates;

/// Migrations in order; the same numbering in every engine.
pub(crate) const MIGRATIONS: &[Migration] = inboxed_core::migrations!();

/// One template per store operation.
pub(crate) const TEMPLATES: Templates = inboxed_core::templates! {
    claim, lookup, record_attempt, record_attempts, forgive, load_attempts, clear_attempts,
    clear_many_attempts, dead_letter, load_dead_letter, delete_dead_letter, enqueue,
    enqueue_lookup, notify, claim_batch, complete, complete_batch, fail, extend_leases, release,
    release_stale, replay_select, replay_reset, replay_audit, purge_done, observe_inbox,
    observe_dead_letters, list_dead_letters, load_dead_letter_by_id, delete_dead_letter_by_id,
    list_partitions, purge_processed, count_expired, processed_stats, purge_dead_letters,
    purge_redrive_audit, redact_done_payloads, migrations_table, migrations_applied,
    migration_record, migrations_exist,
    outbox_write, outbox_claim, outbox_sent, outbox_delete_sent, outbox_fail,
    outbox_release_stale, outbox_release, outbox_purge_sent, outbox_list, outbox_browse, outbox_load,
    outbox_select_dead, outbox_retry, outbox_discard, outbox_audit, observe_outbox,
    switch_open, switch_close, observe_switches,
    letters_select, letters_delete, letters_audit, rows_list, row_load, audit_list, rows_by_key;
    absent:
    // No batch gate: one writer at a time already, and no session locks.
    gate_enter, gate_leave,
    // Partitioned mode partitions by receipt time here: every key is in a time partition.
    purge_untimed,
    // UPDATE … RETURNING claims and stamps in one statement (claim_batch.sql,
    // outbox_claim.sql).
    claim_stamp, outbox_claim_stamp,
    // Keys store the consumer name: no registry.
    register_consumer,
    // One writer at a time: a dead letter's check already sees every claim that committed
    // before it, and none is in flight beside it.
    dead_letter_lock,
    // In process there is no round trip to save: a batch claims its keys with claim.sql, and
    // a batch receipt runs enqueue.sql per message in one transaction (the batch shares the
    // commit, which is what costs).
    claim_many, enqueue_many, enqueue_many_new, enqueue_lookup_many,
    // Likewise the outbox's batch write runs outbox_write.sql per message.
    outbox_write_many,
    // The outbox relay's lock-held claim: a transaction open through a publish would hold
    // SQLite's one write lock, so its relay holds rows under a lease only.
    outbox_lock, outbox_lock_plan, outbox_hold, outbox_mark, outbox_reap_unmarked,
    // No worker registry: a worker's liveness is its lease.
    register_worker, dead_workers, forget_workers, count_workers,
    // The lock-held claim needs row locks, which SQLite does not have.
    lock_batch, count_attempts, finish_locked,
    // Only partitioned mode (PostgreSQL) asks for it.
    server_version,
    // Time partitions are PostgreSQL's.
    lock_key, claim_partitioned, create_partitions, expired_partitions, partition_consumers,
    lock_maintenance, detach_partition, drop_partition,
    // One writer at a time serialises migrators, and the schema is the database file's.
    migrate_lock, migrate_unlock, schema_exists, create_schema,
};

/// Durability settings query; has no identifiers to render.
pub(crate) const CHECK_DURABILITY: &str = include_str!("../sql/check_durability.sql");
