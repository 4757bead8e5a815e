//! The SQLite SQL files, one per store operation; file names match the `Store` method names
//! so that a grep finds every backend's version. This is the only place SQL text enters Rust.

use inboxed_core::migration::Migration;
use inboxed_core::sql::Templates;

/// Migrations in order; the same numbering in every backend.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "inbox",
        sql: include_str!("../migrations/0001_inbox.sql"),
    },
    Migration {
        version: 2,
        description: "inbox_messages",
        sql: include_str!("../migrations/0002_inbox_messages.sql"),
    },
    Migration {
        version: 3,
        description: "inbox_claim_indexes",
        sql: include_str!("../migrations/0003_inbox_claim_indexes.sql"),
    },
    Migration {
        version: 4,
        description: "processed_expiry",
        sql: include_str!("../migrations/0004_processed_expiry.sql"),
    },
    Migration {
        version: 5,
        description: "processed_log",
        sql: include_str!("../migrations/0005_processed_log.sql"),
    },
    Migration {
        version: 6,
        description: "inbox_payload_redacted",
        sql: include_str!("../migrations/0006_inbox_payload_redacted.sql"),
    },
    Migration {
        version: 7,
        description: "inbox_contract",
        sql: include_str!("../migrations/0007_inbox_contract.sql"),
    },
    Migration {
        version: 8,
        description: "inbox_dead_index",
        sql: include_str!("../migrations/0008_inbox_dead_index.sql"),
    },
    Migration {
        version: 9,
        description: "inbox_contract_v2",
        sql: include_str!("../migrations/0009_inbox_contract_v2.sql"),
    },
    Migration {
        version: 10,
        description: "inbox_contract_v3",
        sql: include_str!("../migrations/0010_inbox_contract_v3.sql"),
    },
];

/// One template per store operation.
pub(crate) const TEMPLATES: Templates = Templates {
    claim: include_str!("../sql/claim.sql"),
    // Keys store the consumer name: no registry.
    register_consumer: "",
    lookup: include_str!("../sql/lookup.sql"),
    record_attempt: include_str!("../sql/record_attempt.sql"),
    record_attempts: include_str!("../sql/record_attempts.sql"),
    load_attempts: include_str!("../sql/load_attempts.sql"),
    clear_attempts: include_str!("../sql/clear_attempts.sql"),
    // In process there is no round trip to save: a batch claims its keys with claim.sql.
    claim_many: "",
    clear_many_attempts: include_str!("../sql/clear_many_attempts.sql"),
    dead_letter: include_str!("../sql/dead_letter.sql"),
    load_dead_letter: include_str!("../sql/load_dead_letter.sql"),
    delete_dead_letter: include_str!("../sql/delete_dead_letter.sql"),
    enqueue: include_str!("../sql/enqueue.sql"),
    enqueue_lookup: include_str!("../sql/enqueue_lookup.sql"),
    // A batch receipt runs enqueue.sql per message in one transaction: in-process statements
    // cost little next to the commit, which the batch shares.
    enqueue_many: "",
    enqueue_lookup_many: "",
    notify: include_str!("../sql/notify.sql"),
    claim_batch: include_str!("../sql/claim_batch.sql"),
    complete: include_str!("../sql/complete.sql"),
    complete_batch: include_str!("../sql/complete_batch.sql"),
    fail: include_str!("../sql/fail.sql"),
    extend_leases: include_str!("../sql/extend_leases.sql"),
    release: include_str!("../sql/release.sql"),
    release_stale: include_str!("../sql/release_stale.sql"),
    register_worker: "",
    dead_workers: "",
    forget_workers: "",
    count_workers: "",
    replay_select: include_str!("../sql/replay_select.sql"),
    replay_reset: include_str!("../sql/replay_reset.sql"),
    replay_audit: include_str!("../sql/replay_audit.sql"),
    purge_done: include_str!("../sql/purge_done.sql"),
    observe_inbox: include_str!("../sql/observe_inbox.sql"),
    observe_dead_letters: include_str!("../sql/observe_dead_letters.sql"),
    list_dead_letters: include_str!("../sql/list_dead_letters.sql"),
    load_dead_letter_by_id: include_str!("../sql/load_dead_letter_by_id.sql"),
    delete_dead_letter_by_id: include_str!("../sql/delete_dead_letter_by_id.sql"),
    // SQLite has no partitions: the statement lists none.
    list_partitions: "SELECT NULL AS partition WHERE 0",
    // The lock-held claim needs row locks, which SQLite does not have.
    lock_batch: "",
    count_attempts: "",
    finish_locked: "",
    purge_processed: include_str!("../sql/purge_processed.sql"),
    count_expired: include_str!("../sql/count_expired.sql"),
    processed_stats: include_str!("../sql/processed_stats.sql"),
    purge_dead_letters: include_str!("../sql/purge_dead_letters.sql"),
    purge_redrive_audit: include_str!("../sql/purge_redrive_audit.sql"),
    redact_done_payloads: include_str!("../sql/redact_done_payloads.sql"),
    // Only partitioned mode (PostgreSQL) asks for it.
    server_version: "",
    // Time partitions are PostgreSQL's.
    lock_key: "",
    claim_partitioned: "",
    create_partitions: "",
    expired_partitions: "",
    partition_consumers: "",
    lock_maintenance: "",
    detach_partition: "",
    drop_partition: "",
};

/// Durability settings query; has no identifiers to render.
pub(crate) const CHECK_DURABILITY: &str = include_str!("../sql/check_durability.sql");
