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
use tracing::{debug, error, warn};

use super::config::OutboxRelayConfig;
use super::publish::{Outcome, Publisher};
use super::store::{ClaimOutboxParams, ClaimToken, FailParams, Failed, OutboxRow, OutboxStore};
use crate::error::Error;
use crate::metrics as m;

/// What one claimed batch came to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayReport {
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
    inner: Arc<Inner<S, P>>,
}

#[derive(Debug)]
struct Inner<S, P> {
    store: S,
    publisher: P,
    config: OutboxRelayConfig,
    id: String,
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
        // `<process>/<relay>`, as the inbox workers' ids, shown as the rows' `claimed_by`.
        let id = format!(
            "{}/{}",
            *crate::inbox::PROCESS,
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Self {
            inner: Arc::new(Inner {
                store,
                publisher,
                config,
                id,
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

    /// Claims one batch, publishes it and settles each row by its outcome.
    ///
    /// # Errors
    /// A store failure claiming or settling. Rows whose settling failed keep their lease and
    /// are published again (under the same id) once it runs out.
    pub async fn run_once(&self) -> Result<RelayReport, Error> {
        let inner = &*self.inner;
        let token = ClaimToken::random();
        let rows = inner
            .store
            .claim_outbox(&ClaimOutboxParams {
                relay: &inner.id,
                token: &token,
                limit: inner.config.batch_size.max(1),
                lease: inner.config.lease,
                now: None,
            })
            .await?;
        let mut report = RelayReport {
            claimed: rows.len() as u64,
            ..RelayReport::default()
        };
        if rows.is_empty() {
            return Ok(report);
        }
        let outcomes = inner.publisher.publish(&rows).await;
        let mut outcomes = outcomes.into_iter();
        let (mut confirmed, mut not_sent) = (Vec::new(), Vec::new());
        let mut unreachable = None;
        for row in &rows {
            let outcome = outcomes.next().unwrap_or_else(|| Outcome::Unconfirmed {
                reason: "the publisher gave no outcome for this row".to_owned(),
            });
            match outcome {
                Outcome::Confirmed => confirmed.push(row.id),
                Outcome::Refused { reason, permanent } => {
                    let reason = format!("refused by the broker: {reason}");
                    self.fail(row, &token, &reason, permanent, &mut report)
                        .await?;
                }
                Outcome::Unconfirmed { reason } => {
                    let reason = format!("not confirmed by the broker: {reason}");
                    self.fail(row, &token, &reason, false, &mut report).await?;
                }
                Outcome::NotSent { reason } => {
                    not_sent.push(row.id);
                    unreachable.get_or_insert(reason);
                }
            }
        }
        if !confirmed.is_empty() {
            let marked = if inner.config.sent_retention == Some(Duration::ZERO) {
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
            warn!(
                rows = not_sent.len(),
                error = reason,
                "broker unreachable; rows handed back"
            );
        }
        count(&report);
        Ok(report)
    }

    async fn fail(
        &self,
        row: &OutboxRow,
        token: &ClaimToken,
        reason: &str,
        permanent: bool,
        report: &mut RelayReport,
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
            Failed::Dead => {
                report.dead += 1;
                warn!(
                    row = row.id,
                    message_id = row.message_id,
                    destination = row.destination,
                    error = reason,
                    "outbox row is dead"
                );
            }
            Failed::Retrying => {
                report.retrying += 1;
                debug!(
                    row = row.id,
                    message_id = row.message_id,
                    error = reason,
                    attempts = row.attempts,
                    "outbox row will be retried"
                );
            }
            Failed::LostClaim => report.lost += 1,
        }
        Ok(())
    }

    /// Runs the relay's claim loops and its pass over expired leases until `shutdown`
    /// resolves; then lets batches in flight finish within
    /// [`OutboxRelayConfig::shutdown_grace`]. A batch cut short keeps its lease: its rows are
    /// published again, under the same ids, once it runs out.
    ///
    /// # Errors
    /// None today: store and broker failures are retried with backoff and logged.
    pub async fn run(&self, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        let inner = &*self.inner;
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
        let mut tasks = JoinSet::new();
        for _ in 0..inner.config.concurrency.max(1) {
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
                "outbox batches still publishing at the end of the shutdown grace; their rows wait for their lease"
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

    /// Returns expired claims (a relay that died or hung) to pending, or dead when they are
    /// out of attempts, and purges old sent rows, every
    /// [`OutboxRelayConfig::reap_interval`].
    async fn reap_loop(&self, mut stop: watch::Receiver<bool>) {
        let config = &self.inner.config;
        while !*stop.borrow() {
            if let Err(e) = self.purge_sent().await {
                warn!(error = %e, "could not purge sent outbox rows");
            }
            loop {
                match self
                    .inner
                    .store
                    .release_stale_outbox(config.max_attempts, 1_000, None)
                    .await
                {
                    Ok(n) if n > 0 => {
                        metrics::counter!(m::OUTBOX_LEASES_EXPIRED_TOTAL).increment(n);
                        warn!(
                            rows = n,
                            "outbox rows whose relay stopped before the mark are pending again"
                        );
                        if n < 1_000 {
                            break;
                        }
                    }
                    Ok(_) => break,
                    Err(e) => {
                        warn!(error = %e, "could not return expired outbox claims");
                        break;
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(config.reap_interval) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

fn count(report: &RelayReport) {
    let outcomes = [
        ("sent", report.sent),
        ("retrying", report.retrying),
        ("dead", report.dead),
        ("handed_back", report.handed_back),
        ("lost", report.lost),
    ];
    for (outcome, n) in outcomes {
        if n > 0 {
            metrics::counter!(m::OUTBOX_ROWS_TOTAL, "outcome" => outcome).increment(n);
        }
    }
}
