//! The worker pool: claim loops that process stored rows, until shutdown.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tracing::{error, warn};

use super::config::WorkerConfig;
use super::limits::Permits;
use super::store::{ClaimBatchParams, ClaimToken, Gate, InboxRow, InboxStore};
use crate::envelope::ConsumerName;
use crate::error::Error;
use crate::handler::Handler;
use crate::metrics as m;

/// What one claim-and-process round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchReport {
    /// Rows claimed.
    pub claimed: u64,
    /// Rows whose handler committed with the row marked done.
    pub done: u64,
    /// Rows that failed and will be retried after their backoff.
    pub retrying: u64,
    /// Rows that went dead.
    pub dead: u64,
    /// Rows whose claim was lost to the reaper before completion: rolled back.
    pub lost: u64,
    /// Rows handed back before they ran, over their bucket's rate limit
    /// ([`WorkerConfig::rate_limit`]), their attempt given back: they are claimable again at
    /// their slot, so a report of only deferred rows is not work done.
    pub deferred: u64,
}

/// Processes the stored rows of one consumer: claims batches under fenced leases, then runs
/// them through the handler. A handler with a `handle_batch` of its own gets the whole batch in
/// one transaction, completed and committed once; one with only `handle` runs each row in a
/// transaction of its own, so that concurrent batches never hold each other's business locks.
///
/// # Transactions, locks and leases
/// A claim is its own short transaction; it sets the rows to `processing` with a lease and a
/// token, and counts an attempt. A batch transaction then holds the rows it completes until
/// it commits, so keep batch handlers short or batches small. A heartbeat extends the lease while
/// the batch runs; if a worker stops heartbeating, the reaper returns its rows, and the token
/// check makes any late completion of this worker roll back.
#[derive(Debug)]
pub struct Worker<S, H> {
    pub(super) inner: Arc<Inner<S, H>>,
}

#[derive(Debug)]
pub(super) struct Inner<S, H> {
    pub(super) store: S,
    pub(super) consumer: ConsumerName,
    pub(super) handler: H,
    pub(super) config: WorkerConfig,
    pub(super) id: String,
    /// Tokens of batches in flight with the ids of the rows claimed under each (recorded by
    /// the claim before it lets shutdown in), handed back if shutdown cuts them short.
    pub(super) in_flight: Mutex<HashMap<ClaimToken, Vec<i64>>>,
    /// Held shared by each claim while it runs, exclusively by shutdown before handing back.
    pub(super) claims: Arc<tokio::sync::RwLock<()>>,
    /// Rows per transaction for such a handler, adapted to contention (`batch.rs`).
    pub(super) group_size: std::sync::atomic::AtomicU32,
    /// How many claim loops run a batch at once (`pace.rs`).
    pub(super) pace: super::pace::Pace,
}

impl<S, H> Inner<S, H> {
    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<ClaimToken, Vec<i64>>> {
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<S, H> Clone for Worker<S, H> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S: InboxStore, H: Handler<S::Db>> Worker<S, H> {
    /// A worker for `consumer`'s rows.
    pub fn new(store: S, consumer: ConsumerName, handler: H, config: WorkerConfig) -> Self {
        // `<scope>/<worker>`: the reaper judges the rows of one crash-attribution scope
        // together (release_stale.sql), as the scope judges its batches.
        let id = format!(
            "{}/{}",
            config.crash_attribution.id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        config.kill_switch.start(&consumer);
        // Groups start at the batch size and shrink only under contention.
        let group_size = config.batch_size.max(1);
        let pace = super::pace::Pace::new(
            u32::try_from(config.concurrency).unwrap_or(u32::MAX),
            config.adaptive_concurrency,
        );
        config.crash_attribution.start();
        Self {
            inner: Arc::new(Inner {
                store,
                consumer,
                handler,
                config,
                id,
                in_flight: Mutex::default(),
                claims: Arc::default(),
                group_size: std::sync::atomic::AtomicU32::new(group_size),
                pace,
            }),
        }
    }

    /// This worker's id, as written to `claimed_by`.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Claims one batch and processes it: at most `batch_size` rows, and under an overall
    /// rate limit as many as it has permits for (it waits for the first).
    ///
    /// # Errors
    /// A store failure claiming the batch or committing it. Rows of a batch that could not
    /// commit are handed back to pending.
    pub async fn run_once(&self) -> Result<BatchReport, Error> {
        let config = &self.inner.config;
        let permits = config.rate_limit.take(config.batch_size as usize).await;
        self.run_up_to(Permits::Taken(permits)).await
    }

    /// Claims at most as many rows as `permits` allow and processes them.
    async fn run_up_to(&self, permits: Permits) -> Result<BatchReport, Error> {
        let inner = &*self.inner;
        let limit = match permits {
            Permits::Taken(n) => u32::try_from(n).unwrap_or(u32::MAX),
            Permits::AfterClaim => 1,
        }
        .clamp(1, inner.config.batch_size.max(1));
        if inner.config.claim_mode == super::config::ClaimMode::LockHeld {
            return self.run_locked(limit).await;
        }
        let token = ClaimToken::random();
        self.track(token, true);
        let after = permits == Permits::AfterClaim;
        let report = self.claim_and_process(token, limit, after).await;
        self.track(token, false);
        report
    }

    /// One claim under `token` and its batch. Batches share their crash-attribution scope,
    /// except one holding rows that a dying claim left behind: it waits until every other
    /// batch of the scope has ended, and runs alone in it, so that if it kills the process
    /// the reaper finds only its own rows held and can tell which of them to blame (the crash
    /// halving, release_stale.sql). The wait is bounded by half the lease (its heartbeat
    /// starts with the batch); past it the batch runs beside the others, and a death then
    /// charges its rows as if the limit had been ignored.
    async fn claim_and_process(
        &self,
        token: ClaimToken,
        limit: u32,
        permit_after: bool,
    ) -> Result<BatchReport, Error> {
        let inner = &*self.inner;
        let crash = &inner.config.crash_attribution;
        let shared = crash.shared().await;
        let rows = self.claim(token, limit).await?;
        if rows.is_empty() {
            return Ok(BatchReport::default());
        }
        if permit_after {
            // The claim found work: its permit now, before any handler's transaction.
            inner.config.rate_limit.take(rows.len()).await;
        }
        let marked = rows.iter().any(|r| r.group_limit.is_some());
        let _turn = crash
            .rows_turn(shared, marked, "inbox_rows", inner.config.lease / 2)
            .await;
        let rows = self.isolate_suspect(rows, &token).await?;
        metrics::histogram!(m::CLAIM_BATCH_SIZE, "consumer" => inner.consumer.as_str().to_owned())
            .record(rows.len() as f64);
        let claimed = rows.len() as u64;
        let (rows, deferred) = self.defer_over_limit(rows, &token).await;
        let mut report = self.process_batch(rows, token).await?;
        report.claimed = claimed;
        report.deferred = deferred;
        inner.config.kill_switch.succeeded_times(report.done);
        Ok(report)
    }

    /// Claims a batch under `token` in a task of its own, holding the claim gate: a claim loop
    /// aborted at shutdown cannot cut the claim off between its commit and its reply (it would
    /// commit rows nobody holds). Shutdown waits at the gate, then hands back every token.
    async fn claim(
        &self,
        token: ClaimToken,
        limit: u32,
    ) -> Result<Vec<InboxRow>, crate::error::StoreError> {
        let worker = self.clone();
        let claiming = tokio::spawn(async move {
            let _gate = Arc::clone(&worker.inner.claims).read_owned().await;
            let inner = &*worker.inner;
            let params = ClaimBatchParams {
                consumer: &inner.consumer,
                worker: &inner.id,
                token: &token,
                limit,
                lease: inner.config.lease,
                now: None,
                ordered: inner.config.ordered,
                park: inner.config.on_dead == super::config::OnDead::Park,
            };
            let claimed = inner.store.claim_batch(&params).await;
            // Before the gate opens: shutdown hands back what it finds here.
            if let (Ok(rows), Some(ids)) = (&claimed, inner.in_flight().get_mut(&token)) {
                ids.extend(rows.iter().map(|r| r.id));
            }
            claimed
        });
        match claiming.await {
            Ok(claimed) => claimed,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down: whatever was claimed comes back through the reaper.
            Err(_) => Ok(Vec::new()),
        }
    }

    /// A batch holding rows whose earlier claims died runs only as many rows as the most
    /// limited of them allows (its `group_limit`: half of what its dying claim held), the most
    /// limited first, and hands the rest back (their attempt returned). Each death of a group
    /// halves the next, so a message that kills its worker is cornered in about log2(batch)
    /// deaths, charged attempts only once alone, and goes dead alone after max_attempts; its
    /// batch-mates spend none and go on in large groups.
    async fn isolate_suspect(
        &self,
        mut rows: Vec<InboxRow>,
        token: &ClaimToken,
    ) -> Result<Vec<InboxRow>, Error> {
        let claimed = rows.len();
        let room = |r: &InboxRow| r.group_limit.map_or(claimed, |n| n as usize);
        let group = rows.iter().map(room).min().unwrap_or(claimed);
        if group >= rows.len() {
            return Ok(rows);
        }
        rows.sort_by_key(|r| (room(r), r.id));
        let others: Vec<i64> = rows[group..].iter().map(|r| r.id).collect();
        self.inner
            .store
            .release(token, &others, Duration::ZERO)
            .await?;
        rows.truncate(group);
        Ok(rows)
    }

    fn track(&self, token: ClaimToken, add: bool) {
        let mut set = self.inner.in_flight();
        if add {
            set.insert(token, Vec::new());
        } else {
            set.remove(&token);
        }
    }

    /// Runs `concurrency` claim loops until `shutdown` resolves, then stops claiming, lets
    /// in-flight batches finish within `shutdown_grace`, and hands back the rows of any batch
    /// cut short (their attempt is given back). Nothing claimed is lost: a row is done, back to
    /// pending, or, if this process dies, returned by the reaper when its lease expires.
    ///
    /// # Errors
    /// Only when handing back cut-short rows fails; their leases then expire instead.
    pub async fn run(&self, shutdown: impl Future + Send) -> Result<(), Error> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let (inner, notify) = (&*self.inner, Arc::new(Notify::new()));
        let local = inner.config.notify
            && inner
                .store
                .local_wakers()
                .map(|l| l.register(&inner.consumer, &notify))
                .is_some();
        let subscribing = async {
            if !inner.config.notify {
                return None;
            }
            let sub = inner.store.subscribe(&inner.consumer, Arc::clone(&notify));
            sub.await.unwrap_or_else(|e| {
                warn!(error = %e, "cannot listen for rows stored by other processes; polling for them");
                None
            })
        };
        // Registered before the first claim, so that every row this worker claims belongs to
        // a registered worker; held for the run.
        let registering = async {
            if !inner.config.liveness {
                return None;
            }
            inner.store.hold_liveness(&inner.id).await.unwrap_or_else(|e| {
                warn!(error = %e, "cannot register this worker's liveness; if it dies, its rows wait for their lease");
                None
            })
        };
        // Each opens a connection of its own; side by side, a worker's start is one connection
        // long, not two (16 workers starting at once took 0.10 s to their first row, one 0.02).
        let (subscription, liveness) = tokio::join!(subscribing, registering);
        // Held for the run: dropping the subscription stops its listener.
        let wake = (local || subscription.is_some()).then(|| Arc::clone(&notify));
        let mut loops = JoinSet::new();
        let limit = self
            .inner
            .store
            .max_concurrent_batches()
            .unwrap_or(usize::MAX);
        let count = self.inner.config.concurrency.clamp(1, limit.max(1));
        self.inner.pace.start(
            u32::try_from(count).unwrap_or(u32::MAX),
            liveness.as_ref().map(super::guards::Liveness::peers),
        );
        // Workers whose loops a store gates share `concurrency` batches at once, once more
        // of them are registered than that (`inboxed-mysql/src/gate.rs`).
        let slots = u32::try_from(self.inner.config.concurrency).unwrap_or(u32::MAX);
        for _ in 0..count {
            let worker = self.clone();
            let stop = stop_rx.clone();
            let wake = wake.clone();
            let gate = if self.inner.config.adaptive_concurrency {
                self.inner.store.batch_gate(slots)
            } else {
                None
            };
            loops.spawn(async move { worker.claim_loop(stop, wake, gate).await });
        }
        let (switch, store) = (&self.inner.config.kill_switch, &self.inner.store);
        crate::kill_switch::reporting(switch, store, &self.inner.consumer, shutdown).await;
        let _ = stop_tx.send(true);
        let grace = self.inner.config.shutdown_grace;
        let drained =
            tokio::time::timeout(grace, async { while loops.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            warn!(
                ?grace,
                "batches still running at the end of the shutdown grace; handing their rows back"
            );
            loops.shutdown().await;
        }
        // Claims already sent finish first (their tasks are not aborted), so that their rows
        // carry their token when it is handed back.
        let _no_claims = self.inner.claims.write().await;
        let tokens: Vec<(ClaimToken, Vec<i64>)> = self.inner.in_flight().drain().collect();
        // Every token is tried, whatever fails.
        let mut first_error = None;
        for (token, ids) in tokens.iter().filter(|(_, ids)| !ids.is_empty()) {
            if let Err(e) = self.inner.store.release(token, ids, Duration::ZERO).await {
                warn!(error = %e, "could not hand back a cut-short batch; its lease will expire");
                first_error.get_or_insert(e);
            }
        }
        // After the hand-back, so that no row of this worker is left for the reaper to judge;
        // when some could not be handed back, the registration stays for the reaper to find
        // dead (the session ends with the guard) and return them at its next pass.
        if let Some(liveness) = liveness
            && first_error.is_none()
        {
            liveness.release(Duration::from_secs(5)).await;
        }
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }

    async fn claim_loop(
        &self,
        mut stop: watch::Receiver<bool>,
        wake: Option<Arc<Notify>>,
        gate: Option<Gate>,
    ) {
        // The store failing under this loop: wait about as long as it has been failing.
        let streak = crate::FailureStreak::default();
        let switch = &self.inner.config.kill_switch;
        let lease = self.inner.config.claim_mode == super::config::ClaimMode::Lease;
        let mut idle_before = false;
        while !*stop.borrow() {
            // While the kill switch is open no loop claims; after its pause one batch probes.
            let probe = if lease {
                tokio::select! {
                    probe = switch.admit() => probe,
                    _ = stop.changed() => break,
                }
            } else {
                false
            };
            // Under an overall rate limit, a claim takes only as many rows as it has permits;
            // after a claim that found nothing, one row first and its permit once it is found,
            // so that polling an empty inbox spends no permits that others sharing the limit
            // could use (a lock-held claim, whose transaction must not wait, takes one first).
            let batch = self.inner.config.batch_size as usize;
            let limited = self.inner.config.rate_limit.is_limited();
            let permits = if limited && idle_before && lease {
                Permits::AfterClaim
            } else {
                let limit = &self.inner.config.rate_limit;
                let want = if idle_before { 1 } else { batch };
                tokio::select! {
                    permits = limit.take(want) => Permits::Taken(permits),
                    _ = stop.changed() => {
                        if probe {
                            switch.probe_ended();
                        }
                        break;
                    }
                }
            };
            let Some(slot) = self.inner.pace.enter(&mut stop).await else {
                if probe {
                    switch.probe_ended();
                }
                break;
            };
            let gated = match &gate {
                Some(gate) if self.inner.pace.crowded() => tokio::select! {
                    entered = gate.enter() => entered,
                    _ = stop.changed() => {
                        self.inner.pace.leave(slot, 0, false, Duration::ZERO);
                        break;
                    }
                },
                _ => None,
            };
            // Registered before the claim, so a row stored while it runs still wakes us.
            let mut notified = wake.as_ref().map(|n| Box::pin(n.notified()));
            if let Some(n) = notified.as_mut() {
                n.as_mut().enable();
            }
            let started = std::time::Instant::now();
            let ran = self.run_up_to(permits).await;
            if probe {
                switch.probe_ended();
            }
            if let (Some(gate), Some(entered)) = (&gate, gated) {
                gate.leave(entered);
            }
            let claimed = ran.as_ref().map_or(0, |r| r.claimed);
            idle_before = claimed == 0;
            let full = claimed >= u64::from(self.inner.config.batch_size.max(1));
            self.inner
                .pace
                .leave(slot, claimed, full, started.elapsed());
            metrics::gauge!(m::WORKER_LOOPS, "consumer" => self.inner.consumer.as_str().to_owned())
                .set(f64::from(self.inner.pace.limit()));
            if ran.is_ok() {
                streak.succeeded();
            }
            let idle = match ran {
                Ok(report) if report.claimed > 0 => continue,
                Ok(_) => self
                    .inner
                    .config
                    .poll_interval
                    .mul_f64(0.5 + fastrand::f64()),
                Err(e) => {
                    error!(error = %e, "worker batch failed");
                    self.inner
                        .config
                        .ladder
                        .after_outage(streak.failed())
                        .max(Duration::from_millis(50))
                }
            };
            let woken = async {
                match notified {
                    Some(n) => n.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(idle) => {}
                () = woken => {}
                _ = stop.changed() => {}
            }
        }
    }
}
