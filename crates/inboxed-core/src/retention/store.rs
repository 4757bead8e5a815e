//! The store operations behind retention: purge a bounded batch, count what a purge would
//! take, and the figures an operator sizes the table by. Internal like [`Store`](crate::Store): implemented
//! by the backends of this workspace, may change in minor releases.

use std::future::Future;
use std::time::{Duration, SystemTime};

use crate::engine::Engine;
use crate::envelope::ConsumerName;
use crate::error::StoreError;
use crate::metrics as m;

/// Parameters of [`RetentionStore::purge_processed`].
#[derive(Debug, Clone, Copy)]
pub struct PurgeParams<'a> {
    /// Whose keys.
    pub consumer: &'a ConsumerName,
    /// Keys received before this are purged.
    pub older_than: SystemTime,
    /// At most this many rows.
    pub limit: u32,
    /// Bound on the delete statement (PostgreSQL `statement_timeout`).
    pub statement_timeout: Duration,
    /// Bound on waiting for a lock (PostgreSQL `lock_timeout`, SQLite busy timeout).
    pub lock_timeout: Duration,
}

/// Parameters of the bounded batches on the other tables (dead letters, the re-drive audit,
/// done rows' payloads): a cut-off, a batch size and the transaction's bounds.
#[derive(Debug, Clone, Copy)]
pub struct BatchParams {
    /// Rows older than this are affected.
    pub older_than: SystemTime,
    /// At most this many rows.
    pub limit: u32,
    /// Bound on the statement (PostgreSQL `statement_timeout`).
    pub statement_timeout: Duration,
    /// Bound on waiting for a lock (PostgreSQL `lock_timeout`, SQLite busy timeout).
    pub lock_timeout: Duration,
}

/// Size and age of one consumer's processed keys. Estimates come from the catalog, never from
/// counting the hot table.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct ProcessedStats {
    /// The consumer's share of the table's estimated rows (PostgreSQL: `reltuples` times the
    /// consumer's frequency in `pg_stats`; SQLite: `sqlite_stat1`). `None` before the table
    /// was first analyzed.
    pub estimated_rows: Option<u64>,
    /// Bytes of the table's heap, all consumers (SQLite: the whole database file).
    pub table_bytes: u64,
    /// Bytes of the table's indexes, all consumers (SQLite: 0, included in `table_bytes`).
    pub index_bytes: u64,
    /// Keys received in the last minute, from the time index: the current growth rate.
    pub last_minute: u64,
    /// When the oldest kept key was received. `None`: no keys.
    pub oldest: Option<SystemTime>,
}

impl ProcessedStats {
    /// The figures from a backend's column values: negative or missing values read as none,
    /// the oldest key in milliseconds since the epoch.
    #[must_use]
    pub fn from_columns(
        estimated_rows: Option<i64>,
        table_bytes: i64,
        index_bytes: i64,
        last_minute: i64,
        oldest_ms: Option<f64>,
    ) -> Self {
        let unsigned = |v: i64| u64::try_from(v).unwrap_or(0);
        Self {
            estimated_rows: estimated_rows.and_then(|v| u64::try_from(v).ok()),
            table_bytes: unsigned(table_bytes),
            index_bytes: unsigned(index_bytes),
            last_minute: unsigned(last_minute),
            oldest: oldest_ms
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map(|ms| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(ms / 1000.0)),
        }
    }

    /// Keys per hour at the last minute's rate.
    #[must_use]
    pub fn growth_per_hour(&self) -> u64 {
        self.last_minute.saturating_mul(60)
    }

    /// Sets the processed-keys gauges of `consumer` (oldest key's age at `now`, estimated
    /// keys, growth, table bytes), as the purger does after a pass and `inboxed serve` does on
    /// each refresh.
    pub fn publish(&self, consumer: &ConsumerName, now: SystemTime) {
        self.publish_labelled(consumer, now, &[]);
    }

    /// [`ProcessedStats::publish`] with `labels` on every gauge besides the consumer: the
    /// tenant, where `inboxed serve` reads a database per tenant.
    pub fn publish_labelled(
        &self,
        consumer: &ConsumerName,
        now: SystemTime,
        labels: &[metrics::Label],
    ) {
        let age = self
            .oldest
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        let mut of_consumer = labels.to_vec();
        of_consumer.push(metrics::Label::new(
            "consumer",
            consumer.as_str().to_owned(),
        ));
        metrics::gauge!(m::OLDEST_KEY_AGE_SECONDS, of_consumer.clone()).set(age.as_secs_f64());
        if let Some(rows) = self.estimated_rows {
            metrics::gauge!(m::KEYS_ESTIMATED, of_consumer.clone()).set(rows as f64);
        }
        metrics::gauge!(m::KEYS_GROWTH_PER_HOUR, of_consumer).set(self.growth_per_hour() as f64);
        metrics::gauge!(m::PROCESSED_TABLE_BYTES, labels.to_vec())
            .set((self.table_bytes + self.index_bytes) as f64);
    }
}

/// What one partition maintenance did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionReport {
    /// Partitions created ahead.
    pub created: u64,
    /// Expired partitions detached and dropped.
    pub dropped: u64,
    /// Partitions past the shortest window but kept: they hold keys of a consumer with no
    /// declared window here, or one whose window has not passed over them yet.
    pub kept: u64,
    /// The longest detach and drop of one partition in the pass (zero when none was dropped):
    /// what the partition-drop figure and goal in docs/bench/runs.md measure.
    pub longest_drop: Duration,
    /// Another process held the maintenance lock, so this pass did nothing.
    pub skipped: bool,
}

impl PartitionReport {
    /// A report of `created` and `dropped` partitions, none kept.
    #[must_use]
    pub fn new(created: u64, dropped: u64) -> Self {
        Self {
            created,
            dropped,
            ..Self::default()
        }
    }

    /// The report of a pass that did nothing because another process was maintaining.
    #[must_use]
    pub fn skipped() -> Self {
        Self {
            skipped: true,
            ..Self::default()
        }
    }
}

/// Retention operations. Implemented by the same backends as [`Store`](crate::Store).
pub trait RetentionStore: Engine {
    /// Whether keys live in time partitions; the purger then drops partitions instead of
    /// deleting rows.
    fn partitioned(&self) -> bool {
        false
    }

    /// Partitioned mode: creates the upcoming partitions, and detaches and drops each
    /// partition whose consumers are all in `windows` and whose every key is older than its
    /// consumer's window at `now`. A partition holding a consumer missing from `windows` is
    /// kept: partitions are shared by every consumer of the table.
    fn maintain_partitions(
        &self,
        now: SystemTime,
        windows: &[(ConsumerName, Duration)],
    ) -> impl Future<Output = Result<PartitionReport, StoreError>> + Send {
        let _ = (now, windows);
        async {
            Err(StoreError::Unsupported {
                operation: "time partitions",
                reason: "this store keeps keys in one table; use the row purge",
            })
        }
    }

    /// Whether, in partitioned mode, some keys live outside the time partitions and are purged
    /// row by row beside the partition drops ([`purge_processed`](Self::purge_processed)):
    /// MySQL partitions by the time in UUIDv7 ids, and keeps the keys of other ids in a
    /// partition no time ever expires. Defaults to `false`.
    fn purges_untimed_keys(&self) -> bool {
        false
    }

    /// Deletes at most `limit` of the consumer's keys received before `older_than`, oldest
    /// first, in a transaction of its own under the given timeouts. Returns how many. Refused
    /// in partitioned mode, where expired partitions are dropped whole, unless the store
    /// [purges untimed keys](Self::purges_untimed_keys): then those alone.
    fn purge_processed(
        &self,
        params: &PurgeParams<'_>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let partitioned = self.partitioned();
        async move {
            if partitioned {
                return Err(StoreError::Unsupported {
                    operation: "row purge of a partitioned table",
                    reason: "expired partitions are dropped whole; use maintain_partitions",
                });
            }
            crate::engine::retention::purge_processed(self, params).await
        }
    }

    /// Deletes at most `limit` dead letters whose last failure was before `older_than`, in a
    /// transaction of its own. Returns how many.
    fn purge_dead_letters(
        &self,
        params: &BatchParams,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::retention::batch(self, &self.queries().purge_dead_letters, params)
    }

    /// Deletes at most `limit` re-drive audit records written before `older_than`, in a
    /// transaction of its own. Returns how many.
    fn purge_redrive_audit(
        &self,
        params: &BatchParams,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::retention::batch(self, &self.queries().purge_redrive_audit, params)
    }

    /// Empties the payload of at most `limit` done store-then-process rows finished before
    /// `older_than` (the rows stay, as dedup memory), in a transaction of its own. Returns how
    /// many.
    fn redact_done_payloads(
        &self,
        params: &BatchParams,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::retention::batch(self, &self.queries().redact_done_payloads, params)
    }

    /// How many of the consumer's keys were received before `older_than`, counting at most
    /// `cap` (a dry run's answer, bounded so that it cannot scan a huge table).
    fn count_expired(
        &self,
        consumer: &ConsumerName,
        older_than: SystemTime,
        cap: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        crate::engine::retention::count_expired(self, consumer, older_than, cap)
    }

    /// Size, growth and age of the consumer's keys.
    fn processed_stats(
        &self,
        consumer: &ConsumerName,
    ) -> impl Future<Output = Result<ProcessedStats, StoreError>> + Send {
        crate::engine::retention::processed_stats(self, consumer)
    }
}
