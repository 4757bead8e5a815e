//! Metric names. The library records through the `metrics` facade and never installs an
//! exporter; the application (or `inboxed serve`) does.
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `inboxed_messages_total` | counter | `consumer`, `outcome` | settled messages: `processed`, `duplicate`, `conflict`, `dead_lettered`, `already_dead_lettered` |
//! | `inboxed_failures_total` | counter | `consumer`, `kind` | deliveries returned for requeue: `handler`, `store` |
//! | `inboxed_retries_total` | counter | `consumer` | in-process retries after serialization failures, deadlocks and timeouts |
//! | `inboxed_dead_letters_total` | counter | `consumer`, `reason` | dead letters written: `permanent`, `attempts_exhausted`, `conflict`, `invalid_message` |
//! | `inboxed_handler_duration_seconds` | histogram | `consumer` | time inside the handler |
//! | `inboxed_claim_wait_seconds` | histogram | `consumer` | time the claim statement took, including waiting on a concurrent duplicate |
//!
//! | `inboxed_receipts_total` | counter | `consumer`, `outcome` | store-then-process receipts: `stored`, `duplicate`, `conflict`, `invalid` |
//! | `inboxed_relay_requeues_total` | counter | `consumer` | deliveries the relay handed back because nothing could be stored |
//! | `inboxed_rows_total` | counter | `consumer`, `outcome` | worker rows: `done`, `retrying`, `dead`, `lost` (claim reaped before completion) |
//! | `inboxed_claim_batch_size` | histogram | `consumer` | rows per non-empty claim |
//! | `inboxed_leases_expired_total` | counter | | rows the reaper returned |
//! | `inboxed_purged_rows_total` | counter | `consumer` | processed keys deleted by the purger |
//! | `inboxed_purge_pass_seconds` | histogram | | duration of one purge pass over all consumers |
//! | `inboxed_oldest_key_age_seconds` | gauge | `consumer` | age of the oldest kept key after a pass; well above the window means the purge is behind |
//! | `inboxed_processed_keys_estimated` | gauge | `consumer` | the catalog's estimate of the consumer's kept keys, after a pass |
//! | `inboxed_processed_keys_growth_per_hour` | gauge | `consumer` | keys received in the last minute × 60, after a pass |
//! | `inboxed_processed_table_bytes` | gauge | | heap and index bytes of the processed-keys table, all consumers, after a pass |
//!
//! The dedup hit rate is `duplicate / (processed + duplicate)` over `inboxed_messages_total`:
//! a duplicate writes nothing, so only these counters can show it.

/// Counter of settled messages, labelled `consumer` and `outcome`.
pub const MESSAGES_TOTAL: &str = "inboxed_messages_total";
/// Counter of deliveries returned for requeue, labelled `consumer` and `kind`.
pub const FAILURES_TOTAL: &str = "inboxed_failures_total";
/// Counter of in-process retries of the inbox transaction, labelled `consumer`.
pub const RETRIES_TOTAL: &str = "inboxed_retries_total";
/// Counter of dead letters written, labelled `consumer` and `reason`.
pub const DEAD_LETTERS_TOTAL: &str = "inboxed_dead_letters_total";
/// Histogram of handler time in seconds, labelled `consumer`.
pub const HANDLER_DURATION_SECONDS: &str = "inboxed_handler_duration_seconds";
/// Histogram of claim statement time in seconds, labelled `consumer`.
pub const CLAIM_WAIT_SECONDS: &str = "inboxed_claim_wait_seconds";
/// Counter of store-then-process receipts, labelled `consumer` and `outcome`.
pub const RECEIPTS_TOTAL: &str = "inboxed_receipts_total";
/// Counter of deliveries the relay handed back to the broker because nothing could be stored
/// (the database was unreachable, say), labelled `consumer`.
pub const RELAY_REQUEUES_TOTAL: &str = "inboxed_relay_requeues_total";
/// Counter of rows settled by workers, labelled `consumer` and `outcome`.
pub const ROWS_TOTAL: &str = "inboxed_rows_total";
/// Histogram of rows per non-empty claim, labelled `consumer`.
pub const CLAIM_BATCH_SIZE: &str = "inboxed_claim_batch_size";
/// Counter of expired leases returned by the reaper.
pub const LEASES_EXPIRED_TOTAL: &str = "inboxed_leases_expired_total";
/// Counter of processed keys deleted by the purger, labelled `consumer`.
pub const PURGED_ROWS_TOTAL: &str = "inboxed_purged_rows_total";
/// Histogram of purge pass durations in seconds.
pub const PURGE_PASS_SECONDS: &str = "inboxed_purge_pass_seconds";
/// Histogram of the seconds one expired partition took to detach and drop (PostgreSQL,
/// partitioned mode): the part of a pass that takes locks on the parent table.
pub const PARTITION_DROP_SECONDS: &str = "inboxed_partition_drop_seconds";
/// Gauge of the oldest kept key's age in seconds after a purge pass, labelled `consumer`.
pub const OLDEST_KEY_AGE_SECONDS: &str = "inboxed_oldest_key_age_seconds";
/// Gauge of the catalog's estimate of a consumer's kept keys, labelled `consumer`.
pub const KEYS_ESTIMATED: &str = "inboxed_processed_keys_estimated";
/// Gauge of a consumer's keys per hour at the last minute's rate, labelled `consumer`.
pub const KEYS_GROWTH_PER_HOUR: &str = "inboxed_processed_keys_growth_per_hour";
/// Gauge of the processed-keys table's heap and index bytes.
pub const PROCESSED_TABLE_BYTES: &str = "inboxed_processed_table_bytes";
