//! Metric names. The library records through the `metrics` facade and never installs an
//! exporter; the application (or `inboxed serve`) does.
//!
//! docs/metrics.md lists every metric with its type, labels, meaning and what to alert on.
//!
//! The dedup hit rate is `duplicate / (processed + duplicate)` over `inboxed_messages_total`:
//! a duplicate writes nothing, so only these counters can show it.

/// Counter of settled messages, labelled `consumer` and `outcome`.
pub const MESSAGES_TOTAL: &str = "inboxed_messages_total";
/// Counter of deliveries returned for requeue, labelled `consumer` and `kind`.
pub const FAILURES_TOTAL: &str = "inboxed_failures_total";
/// Gauge of suspects waiting for their turn alone in their crash-attribution scope
/// ([`CrashAttribution`](crate::CrashAttribution)), labelled `work` (`delivery`,
/// `inbox_rows`, `outbox_rows`).
pub const SUSPECTS_WAITING: &str = "inboxed_suspects_waiting";
/// Histogram of the seconds a suspect held its scope alone, labelled `work`; its sum is the
/// time the rest of the scope waited for crash attribution.
pub const ALONE_SECONDS: &str = "inboxed_alone_seconds";
/// Gauge, 1 while a consumer's kill switch holds its deliveries back (open, or a probe out),
/// else 0, labelled `consumer` ([`KillSwitch`](crate::KillSwitch)).
pub const KILL_SWITCH_OPEN: &str = "inboxed_kill_switch_open";
/// Counter of the times a consumer's kill switch opened, labelled `consumer`.
pub const KILL_SWITCH_TRIPS_TOTAL: &str = "inboxed_kill_switch_trips_total";
/// Counter of deliveries and rows held back by their rate limit ([`RateLimit`](crate::RateLimit)),
/// labelled `consumer` and `action`: `deferred` (handed back with the wait as its delay),
/// `waited` (an in-order delivery waited in place for its bucket's permit).
pub const RATE_LIMITED_TOTAL: &str = "inboxed_rate_limited_total";
/// Counter of in-process retries of the inbox transaction, labelled `consumer`.
pub const RETRIES_TOTAL: &str = "inboxed_retries_total";
/// Counter of dead letters written, labelled `consumer` and `reason`.
pub const DEAD_LETTERS_TOTAL: &str = "inboxed_dead_letters_total";
/// Histogram of the seconds from a message's sending (its broker's timestamp, or its
/// producer's: [`Envelope::sent_at`](crate::Envelope::sent_at)) to its processing, recorded
/// when it is processed, labelled `consumer`. A producer's clock ahead of this host's reads
/// as no lag (0).
pub const LAG_SECONDS: &str = "inboxed_lag_seconds";
/// Histogram of handler time in seconds, labelled `consumer`.
pub const HANDLER_DURATION_SECONDS: &str = "inboxed_handler_duration_seconds";
/// Histogram of the inbox transaction's begin and claim in seconds, labelled `consumer`.
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
/// Counter: claimed batches redone one row per transaction after the batch path failed, by
/// `consumer` and `cause` (`handler_error`, `lock_conflict`, `lost_claim`, `completion_failed`,
/// `transaction_failed`); for a handler with only `handle`, its row groups that did not commit.
pub const BATCH_FALLBACKS_TOTAL: &str = "inboxed_batch_fallbacks_total";
/// Counter of rows the reaper returned: expired leases, and rows of dead workers.
pub const LEASES_EXPIRED_TOTAL: &str = "inboxed_leases_expired_total";
/// Gauge: claim loops of a worker allowed to run a batch at once (adapted to contention),
/// labelled `consumer`.
pub const WORKER_LOOPS: &str = "inboxed_worker_loops";
/// Counter of registered workers the reaper found dead (their database session ended).
pub const DEAD_WORKERS_TOTAL: &str = "inboxed_dead_workers_total";
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
/// Gauge of a consumer's retention window in seconds, labelled `consumer` (set by the purger).
pub const RETENTION_WINDOW_SECONDS: &str = "inboxed_retention_window_seconds";
/// Gauge of a consumer's declared redelivery horizon in seconds, labelled `consumer` (set by
/// the purger): the window must exceed it, or a late redelivery is processed twice.
pub const REDELIVERY_HORIZON_SECONDS: &str = "inboxed_redelivery_horizon_seconds";
/// Counter of purge passes that failed.
pub const PURGE_FAILURES_TOTAL: &str = "inboxed_purge_failures_total";
/// Gauge of the Unix time of the last purge pass that succeeded.
pub const PURGE_LAST_SUCCESS_SECONDS: &str = "inboxed_purge_last_success_timestamp_seconds";
/// Counter of outbox rows a relay settled, by `outcome` (sent, retrying, dead, handed_back,
/// lost).
pub const OUTBOX_ROWS_TOTAL: &str = "inboxed_outbox_rows_total";
/// Counter of outbox rows returned to pending (or dead) after their relay died before settling
/// them: a lease that ran out, or a lock-held batch that never settled.
pub const OUTBOX_LEASES_EXPIRED_TOTAL: &str = "inboxed_outbox_leases_expired_total";
/// Counter of sent outbox rows deleted after `OutboxRelayConfig::sent_retention`.
pub const OUTBOX_PURGED_ROWS_TOTAL: &str = "inboxed_outbox_purged_rows_total";

/// The bucket bounds of every histogram the library records, in the histogram's unit: for an
/// application that installs its own Prometheus exporter, so that its durations are exported
/// as histograms (whose buckets add up across replicas for `histogram_quantile`) rather than
/// the exporter's default per-process summaries. `inboxed serve` and the relays set them.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
///
/// let mut builder = PrometheusBuilder::new();
/// for (name, buckets) in inboxed_core::metrics::HISTOGRAM_BUCKETS {
///     builder = builder.set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets)?;
/// }
/// # let _ = builder;
/// # Ok(())
/// # }
/// ```
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[
    (HANDLER_DURATION_SECONDS, STATEMENT_SECONDS),
    (CLAIM_WAIT_SECONDS, STATEMENT_SECONDS),
    (LAG_SECONDS, LAG_BUCKETS),
    (CLAIM_BATCH_SIZE, ROWS),
    (ALONE_SECONDS, ALONE_BUCKETS),
    (PURGE_PASS_SECONDS, MAINTENANCE_SECONDS),
    (PARTITION_DROP_SECONDS, MAINTENANCE_SECONDS),
];

/// A handler's run or a claim statement: from half a millisecond (a claim on a warm index)
/// to the 30 s of a statement timeout.
const STATEMENT_SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// From sending to processing: milliseconds when a consumer keeps up, to an hour of backlog
/// after an outage.
const LAG_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0, 3600.0,
];
/// Rows a claim took: one to the largest batch sizes in use.
const ROWS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];
/// A suspect alone in its scope: a batch's run, up to the half lease a scope waits at most.
const ALONE_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0];
/// A purge pass or a partition's drop: a fraction of a second to a quarter of an hour.
const MAINTENANCE_SECONDS: &[f64] = &[
    0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
];

/// How many deliveries a consumer settled as duplicates, of all it settled: what its
/// process's counters say (`inboxed_messages_total`, or `inboxed_receipts_total` for
/// receipts), since the process started.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DedupRate {
    /// The consumer.
    pub consumer: String,
    /// The counter the counts are from: `inboxed_messages_total` (a processor) or
    /// `inboxed_receipts_total` (receipts, an inbox relay).
    pub counter: &'static str,
    /// Deliveries settled as duplicates.
    pub duplicates: f64,
    /// Duplicates and first deliveries (`processed`, or `stored` for receipts).
    pub settled: f64,
}

impl DedupRate {
    /// The counts of `consumer` from `counter`.
    #[must_use]
    pub fn new(
        consumer: impl Into<String>,
        counter: &'static str,
        duplicates: f64,
        settled: f64,
    ) -> Self {
        Self {
            consumer: consumer.into(),
            counter,
            duplicates,
            settled,
        }
    }

    /// `duplicates / settled`, or `None` before anything was settled.
    #[must_use]
    pub fn rate(&self) -> Option<f64> {
        (self.settled > 0.0).then(|| self.duplicates / self.settled)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::HISTOGRAM_BUCKETS;

    /// The `histogram!` calls of every crate's sources: the name each records, as written
    /// (a constant's path).
    fn recorded_histograms(dir: &Path, found: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                recorded_histograms(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for call in text.split("histogram!(").skip(1) {
                    let name = call.split([',', ')']).next().unwrap_or_default().trim();
                    // A path to a constant; this test's own text mentions the macro too.
                    if !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_:".contains(c))
                    {
                        found.push((path.display().to_string(), name.to_owned()));
                    }
                }
            }
        }
    }

    /// Every histogram a library crate records has its buckets, so that no exporter set up
    /// from `HISTOGRAM_BUCKETS` falls back to a summary for one of them.
    #[test]
    fn every_histogram_the_library_records_has_buckets() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for library in std::fs::read_dir(&crates).unwrap().flatten() {
            let name = library.file_name().to_string_lossy().into_owned();
            // The benchmarks' and tests' own histograms are not the library's.
            if matches!(name.as_str(), "inboxed-bench" | "inboxed-test") {
                continue;
            }
            let src = library.path().join("src");
            if src.is_dir() {
                recorded_histograms(&src, &mut found);
            }
        }
        assert!(found.len() >= HISTOGRAM_BUCKETS.len(), "{found:?}");
        // Each constant's value, from its definition in this file.
        let values: std::collections::HashMap<&str, &str> = include_str!("metrics.rs")
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("pub const ")?;
                let (ident, value) = rest.split_once(": &str = ")?;
                Some((ident, value.trim_end_matches(';').trim_matches('"')))
            })
            .collect();
        for (file, name) in found {
            let constant = name.rsplit("::").next().unwrap();
            let value = values
                .get(constant)
                .unwrap_or_else(|| panic!("{file}: {name} is not a metric name of this module"));
            assert!(
                HISTOGRAM_BUCKETS.iter().any(|(listed, _)| listed == value),
                "{file} records the histogram {value}, which HISTOGRAM_BUCKETS does not list"
            );
        }
    }

    /// Bounds in increasing order: the exporter rejects nothing, but a histogram with
    /// unordered bounds counts wrongly.
    #[test]
    fn bucket_bounds_increase() {
        for (name, buckets) in HISTOGRAM_BUCKETS {
            assert!(!buckets.is_empty(), "{name}");
            assert!(
                buckets.windows(2).all(|w| w[0] < w[1]),
                "{name}: {buckets:?}"
            );
        }
    }
}
