//! The MySQL SQL files, one per store operation (`sql/<operation>.sql`), and the migrations
//! (`migrations/`); file names match the other engines'. This is the only place SQL text
//! enters Rust.

use inboxed_core::migration::Migration;
use inboxed_core::sql::Templates;

/// Migrations in order, numbered as in every engine. Migration 2 creates the store-then-process
/// tables as the other engines have them after their migrations 2 to 10, migration 3 the
/// outbox as they have it after 11 to 13, migration 4 the worker registry of their 10,
/// migration 5 the record of the relay's lock-held batches of their 13, migration 6 the
/// time-partitioned table of their 5, migration 7 the forgiven deliveries of their 15, and
/// migration 8 the rename of their 16 (a new engine starts from their result, so those numbers
/// have nothing to do here).
pub(crate) const MIGRATIONS: &[Migration] = &[
    inboxed_core::migration!(1, "0001_inbox", "inbox"),
    inboxed_core::migration!(2, "0002_inbox_messages", "inbox_messages"),
    inboxed_core::migration!(3, "0003_outbox", "outbox"),
    inboxed_core::migration!(4, "0004_workers", "workers"),
    inboxed_core::migration!(5, "0005_outbox_unsettled", "outbox_unsettled"),
    inboxed_core::migration!(6, "0006_processed_log", "processed_log"),
    inboxed_core::migration!(7, "0007_attempts_forgiven", "attempts_forgiven"),
    inboxed_core::migration!(8, "0008_outbox_unmarked", "outbox_unmarked"),
    inboxed_core::migration!(9, "0009_kill_switches", "kill_switches"),
    inboxed_core::migration!(10, "0010_inbox_headers", "inbox_headers"),
];

/// One template per store operation.
pub(crate) const TEMPLATES: Templates = inboxed_core::templates! {
    claim, lookup, record_attempt, record_attempts, forgive, load_attempts, clear_attempts,
    clear_many_attempts, claim_many, dead_letter, load_dead_letter, delete_dead_letter,
    migrate_lock, migrate_unlock, migrations_table, migrations_applied, migration_record,
    migrations_exist, enqueue, enqueue_lookup, enqueue_many, claim_batch, claim_stamp, complete, complete_batch, fail,
    extend_leases, release, release_stale, register_worker, dead_workers, forget_workers,
    count_workers, gate_enter, gate_leave, replay_select, replay_reset, replay_audit,
    purge_done, observe_inbox, observe_dead_letters, list_dead_letters, load_dead_letter_by_id,
    delete_dead_letter_by_id, purge_processed, count_expired, processed_stats, purge_dead_letters,
    purge_redrive_audit, redact_done_payloads, lock_batch, finish_locked,
    outbox_write, outbox_write_many, outbox_claim, outbox_claim_stamp, outbox_sent, outbox_delete_sent, outbox_fail,
    outbox_release_stale, outbox_release, outbox_purge_sent, outbox_list, outbox_browse, outbox_load,
    outbox_select_dead, outbox_retry, outbox_discard, outbox_audit, observe_outbox,
    switch_open, switch_close, observe_switches,
    outbox_lock, outbox_hold, outbox_mark, outbox_reap_unmarked,
    letters_select, letters_delete, letters_audit, rows_list, row_load, audit_list, rows_by_key,
    claim_partitioned, list_partitions, create_partitions, partition_consumers, lock_maintenance,
    drop_partition, purge_untimed;
    absent:
    // Keys store the consumer's name: no registry.
    register_consumer,
    // The claim and the dead letter each write first and then read the other's row with a
    // locking read, which waits for an uncommitted insert: no lock of their own.
    dead_letter_lock,
    // The database is the schema, and it must exist: the store never creates databases.
    schema_exists, create_schema,
    // A batch receipt that finds a stored key stores that part with enqueue.sql and
    // enqueue_lookup.sql per message (receipt.rs): enqueue_many.sql already takes every key
    // of a part to be new.
    enqueue_many_new, enqueue_lookup_many,
    // No notifications: workers poll, and those of this process wake each other.
    notify,
    // The lock-held batch counts its claims with record_attempts.sql, the processor's count.
    count_attempts,
    // Time partitions: a duplicate is the primary key's error, whatever partition is current
    // (migration 6), so no key lock; the expired partitions are picked from the list in Rust;
    // no server version gate (MySQL 8 and MariaDB 10.6 both partition); a partition is dropped
    // in one step.
    lock_key, expired_partitions, server_version, detach_partition,
    // PostgreSQL's planner setting for the relay's claims: MySQL's claims name their index.
    outbox_lock_plan,
};

/// The server's version and settings ([`crate::MySqlStore::check_server`]); no identifiers.
pub(crate) const CHECK_SERVER: &str = include_str!("../sql/check_server.sql");

/// Partitioned mode's table lock around a partition drop (`partitions.rs`); a template of the
/// namespace, rendered where it runs.
pub(crate) const LOCK_PROCESSED_LOG: &str = include_str!("../sql/lock_processed_log.sql");
