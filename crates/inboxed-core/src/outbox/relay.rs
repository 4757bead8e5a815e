//! The outbox relay: claims committed outbox rows, publishes them through a [`Publisher`],
//! and marks each sent only after the broker confirmed it.
//!
//! The claim is a lease with a token (`outbox_claim.sql`), as the inbox workers' are, so
//! several relays (and several loops of one) share an outbox without sending a row twice at
//! once, a relay that dies mid-batch leaves its rows to the next after the lease, and a mark
//! that comes after the lease was taken away changes nothing. A crash between the broker's
//! confirmation and the mark re-sends the row under the same id: at-least-once to the broker,
//! exactly-once into the next service's inbox.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tracing::{Instrument, error, warn};

use super::config::OutboxRelayConfig;
use super::marks::{Verdict, count, failed_row, handed_back, verdicts, within_group_limit};
use super::publish::Publisher;
use super::store::{ClaimOutboxParams, ClaimToken, FailParams, Failed, OutboxRow, OutboxStore};
use crate::error::Error;
use crate::inbox::ClaimMode;
use crate::metrics as m;

/// What one claimed batch came to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxRelayReport {
    /// Rows claimed.
    pub claimed: u64,
    /// Confirmed by the broker and marked sent.
    pub sent: u64,
    /// Refused or unconfirmed, pending again after their backoff.
    pub retrying: u64,
    /// Dead: refused for good, or out of attempts.
    pub dead: u64,
    /// Not sent (the broker was unreachable) and handed back, their attempt given back.
    pub handed_back: u64,
    /// Their lease was gone before the mark (another relay has them now).
    pub lost: u64,
}

/// Publishes an outbox's committed rows; see the module documentation.
///
/// Cheap to clone: clones share the store, the publisher and the relay's id.
#[derive(Debug)]
pub struct OutboxRelay<S, P> {
    pub(super) inner: Arc<Inner<S, P>>,
}

#[derive(Debug)]
pub(super) struct Inner<S, P> {
    pub(super) store: S,
    pub(super) publisher: P,
    pub(super) config: OutboxRelayConfig,
    pub(super) id: String,
    /// When this relay's loops last judged dead relays' lock-held batches before a batch
    /// (milliseconds since `born`; `u64::MAX`: never); see `OutboxRelay::run_locked`.
    pub(super) judged_at: std::sync::atomic::AtomicU64,
    pub(super) born: std::time::Instant,
}

impl<S, P> Clone for OutboxRelay<S, P> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S: OutboxStore, P: Publisher> OutboxRelay<S, P> {
    /// A relay of `store`'s outbox (its namespace) through `publisher`.
    pub fn new(store: S, publisher: P, config: OutboxRelayConfig) -> Self {
        config.crash_attribution.start();
        // `<scope>/<relay>`, as the inbox workers' ids, shown as the rows' `claimed_by`.
        let id = format!(
            "{}/{}",
            config.crash_attribution.id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Self {
            inner: Arc::new(Inner {
                store,
                publisher,
                config,
                id,
                judged_at: std::sync::atomic::AtomicU64::new(u64::MAX),
                born: std::time::Instant::now(),
            }),
        }
    }

    /// This relay's id, as written to the rows' `claimed_by`.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The publisher.
    pub fn publisher(&self) -> &P {
        &self.inner.publisher
    }

    /// Claims one batch, publishes it and marks each row by what the broker said, holding the rows
    /// as [`OutboxRelayConfig::claim_mode`] says.
    ///
    /// # Errors
    /// A store failure claiming or marking. Under a lease, rows whose mark failed keep
    /// it and are published again (under the same ids) once it runs out; under a lock-held
    /// claim they come free at once, and are published again under the same ids.
    pub async fn run_once(&self) -> Result<OutboxRelayReport, Error> {
        if self.locks() {
            self.run_locked().await
        } else {
            self.run_leased().await
        }
    }

    /// Whether batches are lock-held (the configured mode, or the engine's best).
    fn locks(&self) -> bool {
        match self.inner.config.claim_mode {
            Some(ClaimMode::LockHeld) => true,
            Some(ClaimMode::Lease) => false,
            None => self.inner.store.locks_outbox(),
        }
    }

    async fn run_leased(&self) -> Result<OutboxRelayReport, Error> {
        let inner = &*self.inner;
        let crash = &inner.config.crash_attribution;
        let shared = crash.shared().await;
        let token = ClaimToken::random();
        let mut rows = inner
            .store
            .claim_outbox(&ClaimOutboxParams {
                relay: &inner.id,
                token: &token,
                limit: inner.config.batch_size.max(1),
                lease: inner.config.lease,
                now: None,
            })
            .await?;
        let cut = within_group_limit(&mut rows);
        if !cut.is_empty() {
            // Claimed past a crashed batch's limit: given back with their attempt.
            inner.store.release_outbox(&token, Some(&cut)).await?;
        }
        // Rows of a batch that died run alone in their scope (see `CrashAttribution`), so
        // that if they kill the process only they are charged.
        let marked = rows.iter().any(|r| r.group_limit.is_some());
        let _turn = crash
            .rows_turn(shared, marked, "outbox_rows", inner.config.lease / 2)
            .await;
        let mut report = OutboxRelayReport {
            claimed: rows.len() as u64,
            ..OutboxRelayReport::default()
        };
        if rows.is_empty() {
            return Ok(report);
        }
        let span = crate::trace::spans::send(inner.publisher.system(), &rows);
        let published = inner.publisher.publish(&rows).instrument(span).await;
        let verdicts = verdicts(&rows, published);
        let (mut confirmed, mut not_sent) = (Vec::new(), Vec::new());
        let mut unreachable = None;
        for (row, verdict) in rows.iter().zip(verdicts) {
            match verdict {
                Verdict::Confirmed => confirmed.push(row.id),
                Verdict::Failed { reason, permanent } => {
                    self.fail(row, &token, &reason, permanent, &mut report)
                        .await?;
                }
                Verdict::NotSent(reason) => {
                    not_sent.push(row.id);
                    unreachable.get_or_insert(reason);
                }
            }
        }
        if !confirmed.is_empty() {
            let marked = if self.keeps_no_sent_rows() {
                // No record kept: a delete writes no second version of the row.
                inner.store.delete_sent(&confirmed, &token).await?
            } else {
                inner.store.mark_sent(&confirmed, &token, None).await?
            };
            report.sent = marked.len() as u64;
            let lost = confirmed.len() - marked.len();
            if lost > 0 {
                // Published and confirmed, but another relay holds them now and will publish
                // them again under the same ids: a lease shorter than a publish.
                warn!(
                    rows = lost,
                    lease = ?inner.config.lease,
                    "rows were confirmed after their lease ran out; they will be sent again"
                );
                report.lost += lost as u64;
            }
        }
        if let Some(reason) = unreachable {
            report.handed_back = inner.store.release_outbox(&token, Some(&not_sent)).await?;
            handed_back(not_sent.len(), &reason);
        }
        count(&report);
        Ok(report)
    }

    /// `sent_retention` zero: confirmed rows are deleted instead of marked.
    pub(super) fn keeps_no_sent_rows(&self) -> bool {
        self.inner.config.sent_retention == Some(Duration::ZERO)
    }

    async fn fail(
        &self,
        row: &OutboxRow,
        token: &ClaimToken,
        reason: &str,
        permanent: bool,
        report: &mut OutboxRelayReport,
    ) -> Result<(), Error> {
        let config = &self.inner.config;
        let failed = self
            .inner
            .store
            .fail_outbox(&FailParams {
                id: row.id,
                token,
                error: reason,
                backoff: config.backoff.delay(row.attempts),
                max_attempts: config.max_attempts,
                permanent,
                now: None,
            })
            .await?;
        match failed {
            Failed::Dead => failed_row(row, reason, true, report),
            Failed::Retrying => failed_row(row, reason, false, report),
            Failed::LostClaim => report.lost += 1,
        }
        Ok(())
    }

    /// Runs the relay's claim loops and its reaper ([`OutboxRelay::reap`], also once before the
    /// loops start) until `shutdown` resolves; then lets batches in flight finish within
    /// [`OutboxRelayConfig::shutdown_grace`]. A batch cut short is judged as a crashed one:
    /// under a lease its rows wait for the lease to run out; lock-held, they are free at once
    /// and the next reap counts it (an attempt for a batch of one row, a halving otherwise).
    /// Either way they are published again under the same ids.
    ///
    /// # Errors
    /// None today: store and broker failures are retried with backoff and logged.
    pub async fn run(&self, shutdown: impl Future + Send) -> Result<(), Error> {
        let inner = &*self.inner;
        let loops = inner.config.concurrency.max(1);
        let wanted = u32::try_from(2 * loops + 2).unwrap_or(u32::MAX);
        match inner.store.max_connections() {
            Some(pool) if self.locks() && pool < wanted => warn!(
                pool,
                wanted,
                "the outbox relay's pool is smaller than two connections a lock-held loop plus \
                 the reaper's and the listener's: loops will wait for connections"
            ),
            _ => {}
        }
        let (stop_tx, stop_rx) = watch::channel(false);
        let wake = Arc::new(Notify::new());
        let _subscription = if inner.config.notify {
            inner
                .store
                .listen_outbox(Arc::clone(&wake))
                .await
                .unwrap_or_else(|e| {
                    warn!(error = %e, "cannot listen for outbox writes; polling for them");
                    None
                })
        } else {
            None
        };
        // A relay restarted after a crash judges its own last batches before it claims again:
        // claimed again first, a row that killed it would take a whole batch down once more.
        if let Err(e) = self.reap().await {
            warn!(error = %e, "could not return dead relays' outbox rows");
        }
        let mut tasks = JoinSet::new();
        for _ in 0..loops {
            let (relay, stop, wake) = (self.clone(), stop_rx.clone(), Arc::clone(&wake));
            tasks.spawn(async move { relay.claim_loop(stop, wake).await });
        }
        let reaper = {
            let (relay, stop) = (self.clone(), stop_rx.clone());
            tokio::spawn(async move { relay.reap_loop(stop).await })
        };
        shutdown.await;
        let _ = stop_tx.send(true);
        let grace = inner.config.shutdown_grace;
        let drained =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            warn!(
                ?grace,
                "outbox batches still publishing at the end of the shutdown grace; their rows will be sent again under the same ids"
            );
            tasks.shutdown().await;
        }
        reaper.abort();
        Ok(())
    }

    async fn claim_loop(&self, mut stop: watch::Receiver<bool>, wake: Arc<Notify>) {
        let config = &self.inner.config;
        let (mut failures, mut outage) = (0u32, 0u32);
        while !*stop.borrow() {
            // Registered before the claim, so a write committed while it runs still wakes us.
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let idle = match self.run_once().await {
                Ok(report) if report.handed_back > 0 => {
                    outage += 1;
                    config.reconnect.delay(outage)
                }
                Ok(report) if report.claimed > 0 => {
                    (failures, outage) = (0, 0);
                    if report.claimed >= u64::from(config.batch_size.max(1)) {
                        // A backlog: another loop may as well join.
                        wake.notify_one();
                    }
                    continue;
                }
                Ok(_) => {
                    (failures, outage) = (0, 0);
                    config.poll_interval.mul_f64(0.5 + fastrand::f64())
                }
                Err(e) => {
                    failures += 1;
                    error!(error = %e, "outbox relay batch failed");
                    config
                        .reconnect
                        .delay(failures)
                        .max(Duration::from_millis(50))
                }
            };
            // A paused loop (the broker or the database away) is not woken by writes.
            let paused = outage > 0 || failures > 0;
            tokio::select! {
                () = tokio::time::sleep(idle) => {}
                () = notified, if !paused => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Deletes the rows sent longer ago than [`OutboxRelayConfig::sent_retention`], in
    /// batches of 1,000 until one comes back short; how many.
    ///
    /// # Errors
    /// A batch failed (the batches before it stay deleted).
    pub async fn purge_sent(&self) -> Result<u64, Error> {
        const BATCH: u32 = 1_000;
        let Some(keep) = self.inner.config.sent_retention else {
            return Ok(0);
        };
        let Some(before) = std::time::SystemTime::now().checked_sub(keep) else {
            return Ok(0);
        };
        let mut purged = 0;
        loop {
            let n = self.inner.store.purge_sent(before, BATCH).await?;
            purged += n;
            if n < u64::from(BATCH) {
                metrics::counter!(m::OUTBOX_PURGED_ROWS_TOTAL).increment(purged);
                return Ok(purged);
            }
        }
    }

    /// Judges the batches of relays that died: lock-held batches that were never marked and
    /// leases that ran out get their rows back to pending (or dead, out of attempts), halving
    /// the batch around a row that may have killed its relay. How many rows.
    ///
    /// # Errors
    /// A statement failed (the passes before it stand).
    pub async fn reap(&self) -> Result<u64, Error> {
        const LIMIT: u32 = 1_000;
        let inner = &*self.inner;
        let max_attempts = inner.config.max_attempts;
        let mut judged = inner.store.reap_unmarked_outbox(max_attempts).await?;
        loop {
            let n = inner
                .store
                .release_stale_outbox(max_attempts, LIMIT, None)
                .await?;
            judged += n;
            if n < u64::from(LIMIT) {
                break;
            }
        }
        if judged > 0 {
            super::marks::judged(judged);
        }
        Ok(judged)
    }

    /// Judges dead relays' batches ([`OutboxRelay::reap`]) and purges old sent rows, every
    /// [`OutboxRelayConfig::reap_interval`].
    async fn reap_loop(&self, mut stop: watch::Receiver<bool>) {
        let config = &self.inner.config;
        while !*stop.borrow() {
            if let Err(e) = self.purge_sent().await {
                warn!(error = %e, "could not purge sent outbox rows");
            }
            if let Err(e) = self.reap().await {
                warn!(error = %e, "could not return dead relays' outbox rows");
            }
            tokio::select! {
                () = tokio::time::sleep(config.reap_interval) => {}
                _ = stop.changed() => {}
            }
        }
    }
}
