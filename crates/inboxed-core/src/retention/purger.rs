//! The purger: forgets keys older than each consumer's window, a bounded batch at a time, so
//! that cleanup never holds locks long enough to stall the hot path.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use tracing::{info, warn};

use super::store::{BatchParams, PurgeParams, RetentionStore};
use super::{Retention, RetentionError};
use crate::envelope::ConsumerName;
use crate::error::Error;
use crate::metrics as m;

/// How the purger paces itself. Plain fields, each with its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PurgerConfig {
    /// Rows per delete, each in its own short transaction. Defaults to 5,000.
    pub batch_size: u32,
    /// Pause between batches, with ±50% jitter so that several purgers do not fall into step.
    /// Defaults to 10 ms.
    pub pause: Duration,
    /// Time between passes of [`Purger::run`]. Defaults to 5 minutes.
    pub interval: Duration,
    /// Bound on each delete statement. Defaults to 5 s.
    pub statement_timeout: Duration,
    /// Bound on waiting for a lock; a purge gives way instead of queueing. Defaults to 1 s.
    pub lock_timeout: Duration,
}

impl Default for PurgerConfig {
    fn default() -> Self {
        Self {
            batch_size: 5_000,
            pause: Duration::from_millis(10),
            interval: Duration::from_secs(300),
            statement_timeout: Duration::from_secs(5),
            lock_timeout: Duration::from_secs(1),
        }
    }
}

impl PurgerConfig {
    /// Sets [`PurgerConfig::batch_size`].
    #[must_use]
    pub fn batch_size(mut self, batch_size: u32) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets [`PurgerConfig::pause`].
    #[must_use]
    pub fn pause(mut self, pause: Duration) -> Self {
        self.pause = pause;
        self
    }

    /// Sets [`PurgerConfig::interval`].
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Sets [`PurgerConfig::statement_timeout`].
    #[must_use]
    pub fn statement_timeout(mut self, statement_timeout: Duration) -> Self {
        self.statement_timeout = statement_timeout;
        self
    }

    /// Sets [`PurgerConfig::lock_timeout`].
    #[must_use]
    pub fn lock_timeout(mut self, lock_timeout: Duration) -> Self {
        self.lock_timeout = lock_timeout;
        self
    }
}

/// What one pass purged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PassReport {
    /// Rows deleted per consumer, in the order the consumers were added.
    pub deleted: Vec<(ConsumerName, u64)>,
    /// How long the pass took.
    pub duration: Duration,
    /// Partitioned mode: partitions created ahead and expired partitions dropped.
    pub partitions: super::PartitionReport,
    /// Dead letters deleted by their own window.
    pub dead_letters: u64,
    /// Re-drive audit records deleted by their own window.
    pub audit_records: u64,
    /// Done store-then-process rows whose payload was emptied.
    pub redacted_payloads: u64,
}

impl PassReport {
    /// Rows deleted over all consumers.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.deleted.iter().map(|(_, n)| n).sum()
    }
}

/// Purges the processed keys of the consumers it was given, each by its own window.
#[derive(Debug, Clone)]
pub struct Purger<S> {
    store: S,
    config: PurgerConfig,
    consumers: Vec<(ConsumerName, Retention)>,
    others: OtherWindows,
}

/// Retention of the tables that are not dedup memory; `None` keeps rows for ever.
#[derive(Debug, Clone, Copy, Default)]
struct OtherWindows {
    dead_letters: Option<Duration>,
    redrive_audit: Option<Duration>,
    done_payloads: Option<Duration>,
}

impl<S: RetentionStore> Purger<S> {
    /// A purger with no consumers yet.
    pub fn new(store: S, config: PurgerConfig) -> Self {
        Self {
            store,
            config,
            consumers: Vec::new(),
            others: OtherWindows::default(),
        }
    }

    /// Deletes dead letters whose last failure is older than `window`. Not set: kept for ever.
    /// Payloads in dead letters may hold personal data; a key whose dead letter is gone is no
    /// longer held back, and its next redelivery is attempted again.
    #[must_use]
    pub fn dead_letters(mut self, window: Duration) -> Self {
        self.others.dead_letters = Some(window);
        self
    }

    /// Deletes re-drive audit records older than `window`. Not set: kept for ever.
    #[must_use]
    pub fn redrive_audit(mut self, window: Duration) -> Self {
        self.others.redrive_audit = Some(window);
        self
    }

    /// Empties the stored payload of store-then-process rows done longer ago than `window`;
    /// the rows stay as dedup memory until `Inbox::purge_done` removes them, but can no longer
    /// be re-driven. Not set: payloads are kept as long as their rows.
    #[must_use]
    pub fn done_payloads(mut self, window: Duration) -> Self {
        self.others.done_payloads = Some(window);
        self
    }

    /// Adds `consumer` with its retention, checked here: a window that would break
    /// deduplication is refused before anything is deleted.
    ///
    /// # Errors
    /// [`RetentionError`] when the window is shorter than horizon plus margin (and not
    /// overridden) or zero.
    pub fn consumer(
        mut self,
        consumer: ConsumerName,
        retention: Retention,
    ) -> Result<Self, RetentionError> {
        retention.check(&consumer)?;
        self.consumers.push((consumer, retention));
        Ok(self)
    }

    /// One pass over every consumer at `now`: batches until one comes back short. `progress`
    /// is called after each batch with the consumer and its running total.
    ///
    /// # Errors
    /// A store failure (a timeout included); the batches before it stay deleted, and the next
    /// pass continues where this one stopped.
    pub async fn purge_once(
        &self,
        now: SystemTime,
        mut progress: impl FnMut(&ConsumerName, u64),
    ) -> Result<PassReport, Error> {
        let started = Instant::now();
        let mut report = PassReport::default();
        for (consumer, retention) in &self.consumers {
            let label = consumer.as_str().to_owned();
            metrics::gauge!(m::RETENTION_WINDOW_SECONDS, "consumer" => label.clone())
                .set(retention.window.as_secs_f64());
            metrics::gauge!(m::REDELIVERY_HORIZON_SECONDS, "consumer" => label)
                .set(retention.redelivery_horizon.as_secs_f64());
        }
        if self.store.partitioned() {
            // Partitions hold every consumer's keys: one goes when each consumer in it is
            // declared here and past its own window. Shorter windows keep keys longer, never
            // shorter, and an undeclared consumer keeps the partition.
            let windows: Vec<(ConsumerName, Duration)> = self
                .consumers
                .iter()
                .map(|(c, r)| (c.clone(), r.window))
                .collect();
            report.partitions = self.store.maintain_partitions(now, &windows).await?;
            for (consumer, retention) in &self.consumers {
                // Keys no partition drop reaches (MySQL: ids without a time) go row by row.
                let n = if self.store.purges_untimed_keys() {
                    let older_than = now
                        .checked_sub(retention.window)
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    self.purge_consumer(consumer, older_than, &mut progress)
                        .await?
                } else {
                    0
                };
                report.deleted.push((consumer.clone(), n));
                self.record_oldest(consumer, now).await;
            }
            self.purge_others(now, &mut report).await?;
            report.duration = started.elapsed();
            metrics::histogram!(m::PURGE_PASS_SECONDS).record(report.duration.as_secs_f64());
            return Ok(report);
        }
        for (consumer, retention) in &self.consumers {
            let older_than = now
                .checked_sub(retention.window)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let n = self
                .purge_consumer(consumer, older_than, &mut progress)
                .await?;
            report.deleted.push((consumer.clone(), n));
            self.record_oldest(consumer, now).await;
        }
        self.purge_others(now, &mut report).await?;
        report.duration = started.elapsed();
        metrics::histogram!(m::PURGE_PASS_SECONDS).record(report.duration.as_secs_f64());
        Ok(report)
    }

    /// The tables with windows of their own, each in bounded batches until one is short.
    async fn purge_others(&self, now: SystemTime, report: &mut PassReport) -> Result<(), Error> {
        let batch = |window: Duration| BatchParams {
            older_than: now.checked_sub(window).unwrap_or(SystemTime::UNIX_EPOCH),
            limit: self.config.batch_size.max(1),
            statement_timeout: self.config.statement_timeout,
            lock_timeout: self.config.lock_timeout,
        };
        let OtherWindows {
            dead_letters,
            redrive_audit,
            done_payloads,
        } = self.others;
        if let Some(w) = dead_letters {
            let p = batch(w);
            report.dead_letters = self
                .repeat(|| self.store.purge_dead_letters(&p), |_, _| {})
                .await?;
        }
        if let Some(w) = redrive_audit {
            let p = batch(w);
            report.audit_records = self
                .repeat(|| self.store.purge_redrive_audit(&p), |_, _| {})
                .await?;
        }
        if let Some(w) = done_payloads {
            let p = batch(w);
            report.redacted_payloads = self
                .repeat(|| self.store.redact_done_payloads(&p), |_, _| {})
                .await?;
        }
        Ok(())
    }

    /// Runs `op` until it affects fewer rows than a batch, pausing (with jitter) between
    /// batches; `after` sees each batch's count and the running total.
    async fn repeat<F, Fut>(&self, op: F, mut after: impl FnMut(u64, u64)) -> Result<u64, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<u64, crate::error::StoreError>>,
    {
        let batch = u64::from(self.config.batch_size.max(1));
        let mut total = 0;
        loop {
            let n = op().await?;
            total += n;
            after(n, total);
            if n < batch {
                return Ok(total);
            }
            tokio::time::sleep(self.config.pause.mul_f64(0.5 + fastrand::f64())).await;
        }
    }

    async fn purge_consumer(
        &self,
        consumer: &ConsumerName,
        older_than: SystemTime,
        progress: &mut impl FnMut(&ConsumerName, u64),
    ) -> Result<u64, Error> {
        let batch = self.config.batch_size.max(1);
        let params = PurgeParams {
            consumer,
            older_than,
            limit: batch,
            statement_timeout: self.config.statement_timeout,
            lock_timeout: self.config.lock_timeout,
        };
        let counter =
            metrics::counter!(m::PURGED_ROWS_TOTAL, "consumer" => consumer.as_str().to_owned());
        self.repeat(
            || self.store.purge_processed(&params),
            |n, total| {
                counter.increment(n);
                progress(consumer, total);
            },
        )
        .await
    }

    /// The table's figures after a pass, as gauges. The oldest kept key's age should hover
    /// near the window; far above it means the purger is not keeping up (or not running).
    async fn record_oldest(&self, consumer: &ConsumerName, now: SystemTime) {
        match self.store.processed_stats(consumer).await {
            Ok(stats) => stats.publish(consumer, now),
            Err(e) => {
                warn!(error = %e, consumer = %consumer, "could not read the oldest key's age")
            }
        }
    }

    /// Runs a pass every `interval` until `shutdown` resolves (a batch cut short by it rolls
    /// back). A failed pass is logged and retried at the next interval: a purge that falls
    /// behind only lets the table grow.
    pub async fn run(&self, shutdown: impl Future + Send) {
        // Present from the start at 0, so that the first failure is an increase an alert sees.
        metrics::counter!(m::PURGE_FAILURES_TOTAL).increment(0);
        tokio::pin!(shutdown);
        loop {
            let pass = tokio::select! {
                _ = &mut shutdown => return,
                pass = self.purge_once(SystemTime::now(), |_, _| {}) => pass,
            };
            match pass {
                Ok(report) => {
                    if report.total() > 0 {
                        info!(rows = report.total(), duration = ?report.duration, "purged processed keys");
                    }
                    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
                    metrics::gauge!(m::PURGE_LAST_SUCCESS_SECONDS)
                        .set(now.unwrap_or_default().as_secs_f64());
                }
                Err(e) => {
                    metrics::counter!(m::PURGE_FAILURES_TOTAL).increment(1);
                    warn!(error = %e, "purge pass failed; retrying at the next interval");
                }
            }
            tokio::select! {
                _ = &mut shutdown => return,
                () = tokio::time::sleep(self.config.interval) => {}
            }
        }
    }
}
