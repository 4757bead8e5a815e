//! The checks for store-then-process handlers: the same properties through the library's
//! `Worker`, with its receipt, its fenced leases and its reaper. Each run stores the message
//! under a consumer of its own and drains it with `run_once`.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use inboxed_core::driver::Driver;
use inboxed_core::inbox::{
    ClaimMode, Inbox, InboxStore, Reaper, ReaperConfig, Worker, WorkerConfig,
};
use inboxed_core::{ConsumerName, Envelope, Handler, Ladder};
use tokio::sync::Notify;

use crate::failure::{CheckFailure, Report};
use crate::fault::{Fault, Faulty, kill_when_ran};
use crate::kit::Kit;

/// A reaper's clock far past any lease: every claim in flight is expired to it.
const LATER: Duration = Duration::from_secs(3600);
/// How long the second worker of `worker_lease_expires` claims again while the database is
/// busy with the first worker's transaction.
const BUSY_WAIT: Duration = Duration::from_secs(30);

impl<S, H, T> Kit<S, H, T>
where
    S: InboxStore + Clone + Send + Sync + 'static,
    H: Handler<S::Db>,
    T: PartialEq + Debug + Send + 'static,
{
    /// Every `worker_*` check on `msg`, each from a reset; the failures of all of them.
    ///
    /// # Errors
    /// A [`Report`] of the checks that failed.
    pub async fn check_all_workers(&self, msg: &Envelope) -> Result<(), Report> {
        let mut failures = Vec::new();
        let mut add = |r: Result<(), CheckFailure>| failures.extend(r.err());
        add(self.worker_duplicates(msg).await);
        add(self.worker_crash_before_commit(msg).await);
        add(self.worker_lease_expires(msg).await);
        add(self.worker_poison(msg).await);
        Report::of(failures)
    }

    /// The message stored [`KitConfig::deliveries`](crate::KitConfig::deliveries) times (a
    /// producer's retries), drained by a worker, then stored again after it was done: the state
    /// is one delivery's.
    ///
    /// # Errors
    /// The state differs from one delivery's.
    pub async fn worker_duplicates(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "worker_duplicates";
        let once = self.worker_after_one(CHECK, msg).await?;
        self.reset(CHECK).await?;
        let consumer = self.consumer(CHECK);
        for _ in 0..self.config.deliveries.max(2) {
            self.receive(CHECK, &consumer, msg).await?;
        }
        self.drain(CHECK, &self.worker(&consumer, Fault::None), 1)
            .await?;
        self.receive(CHECK, &consumer, msg).await?;
        self.drain(CHECK, &self.worker(&consumer, Fault::None), 0)
            .await?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a message stored several times, and again after it was done, leaves one delivery's \
             state",
            &once,
            &found,
            "the handler's effect does not go through `conn`",
        )
    }

    /// A worker killed after its handler returned, before the commit; the row's lease expires
    /// (the reaper, with its clock an hour ahead), and another worker processes it.
    ///
    /// # Errors
    /// The state differs from one delivery's.
    pub async fn worker_crash_before_commit(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "worker_crash_before_commit";
        let once = self.worker_after_one(CHECK, msg).await?;
        self.reset(CHECK).await?;
        let consumer = self.consumer(CHECK);
        self.receive(CHECK, &consumer, msg).await?;
        self.kill_a_worker_then_drain(CHECK, &consumer, 1).await?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a worker killed before its commit, its row then processed by another, leaves one \
             delivery's state",
            &once,
            &found,
            "the handler writes outside the transaction it is given, so the killed worker's \
             work stayed",
        )
    }

    /// A worker's lease expires while its handler runs (it holds after returning `Ok`); the
    /// reaper returns the row, another worker claims and processes it, and the first worker's
    /// completion is fenced off: its transaction rolls back. The state is one delivery's. (On
    /// SQLite the running handler's transaction holds the write lock, and a lock-held worker
    /// holds the row's lock, so there nothing can take the row meanwhile and the first worker
    /// simply completes.)
    ///
    /// # Errors
    /// The state differs from one delivery's.
    pub async fn worker_lease_expires(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "worker_lease_expires";
        let once = self.worker_after_one(CHECK, msg).await?;
        self.reset(CHECK).await?;
        let consumer = self.consumer(CHECK);
        self.receive(CHECK, &consumer, msg).await?;
        let (ran, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let slow = self.worker(
            &consumer,
            Fault::Wait {
                ran: Arc::clone(&ran),
                go: Arc::clone(&go),
            },
        );
        let mut first = tokio::spawn(async move { slow.run_once().await });
        tokio::select! {
            () = ran.notified() => {}
            ended = &mut first => {
                return Err(CheckFailure::broken(
                    CHECK,
                    format!(
                        "the first worker's batch ended before its handler returned Ok, with \
                         nothing to expire under it: {ended:?}"
                    ),
                ));
            }
        }
        // Where a running handler holds nothing the reaper needs (lease mode on a server
        // with row locks), the lease expires now, while the first handler runs, and the first
        // completion must be fenced off. On SQLite the handler's transaction holds the write
        // lock, and a lock-held worker the row's lock: the reaper waits for the first worker.
        let fenced = <S::Db as Driver>::NAME != "SQLite"
            && self.config.worker.claim_mode == ClaimMode::Lease;
        let second = self.worker(&consumer, Fault::None);
        let later = if fenced {
            self.reap(CHECK).await?;
            tokio::spawn(async move { second.run_once().await })
        } else {
            let reaper = self.reaper();
            tokio::spawn(async move {
                reaper.reap_once(Some(SystemTime::now() + LATER)).await?;
                // It waits on the first worker's locks: on a loaded machine past SQLite's busy
                // timeout. A worker's loop claims again after a busy database; so does this.
                let deadline = tokio::time::Instant::now() + BUSY_WAIT;
                loop {
                    match second.run_once().await {
                        Err(inboxed_core::Error::Store(inboxed_core::StoreError::Busy(_)))
                            if tokio::time::Instant::now() < deadline =>
                        {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        ended => break ended,
                    }
                }
            })
        };
        tokio::time::sleep(self.config.hold).await;
        go.notify_one();
        let mut reports = Vec::new();
        for (which, task) in [("first", first), ("second", later)] {
            reports.push(
                task.await
                    .map_err(|e| CheckFailure::broken(CHECK, format!("a worker panicked: {e}")))?
                    .map_err(|e| {
                        CheckFailure::broken(
                            CHECK,
                            format!("the {which} worker's batch failed: {e}"),
                        )
                    })?,
            );
        }
        if fenced && reports[0].lost == 0 {
            return Err(CheckFailure::broken(
                CHECK,
                format!(
                    "the first worker's completion was not fenced off after its lease was \
                     reaped (its report: {:?})",
                    reports[0]
                ),
            ));
        }
        self.drain(CHECK, &self.worker(&consumer, Fault::None), 0)
            .await?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a lease that expired under a running handler, the row processed by another worker, \
             leaves one delivery's state",
            &once,
            &found,
            "the handler writes outside the transaction it is given, so the fenced-off worker's \
             work stayed",
        )
    }

    /// `msgs` (at least two distinct messages) stored and claimed as one batch by a worker,
    /// which hands a batch of rows to the handler's `handle_batch` when the handler has one of
    /// its own (one row alone goes to `handle`): the worker killed after its handler returned,
    /// before the commit; the rows reaped and drained by another worker. The state is the one
    /// the messages leave processed one at a time. A handler without a `handle_batch` has its
    /// rows run through `handle`, in groups that share a transaction, and is checked that
    /// way.
    ///
    /// # Errors
    /// The state differs from the one-at-a-time state.
    pub async fn worker_batches(&self, msgs: &[Envelope]) -> Result<(), CheckFailure> {
        const CHECK: &str = "worker_batches";
        if msgs.len() < 2 {
            return Err(CheckFailure::broken(
                CHECK,
                "a batch needs at least two distinct messages",
            ));
        }
        self.reset(CHECK).await?;
        let consumer = self.consumer(CHECK);
        for msg in msgs {
            self.receive(CHECK, &consumer, msg).await?;
            self.drain(CHECK, &self.worker(&consumer, Fault::None), 1)
                .await?;
        }
        let sequential = self.probe(CHECK).await?;

        self.reset(CHECK).await?;
        let consumer = self.consumer(CHECK);
        for msg in msgs {
            self.receive(CHECK, &consumer, msg).await?;
        }
        self.kill_a_worker_then_drain(CHECK, &consumer, msgs.len() as u64)
            .await?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a worker killed before the commit of a batch of rows, the rows then processed by \
             another, leaves the state the messages leave one at a time",
            &sequential,
            &found,
            "the handler (its handle_batch, when it has one) writes outside the transaction it \
             is given, so the killed worker's work stayed",
        )
    }

    /// A row that fails after the handler every time: it ends dead after the worker's
    /// `max_attempts`, with no business effect (the reset state).
    ///
    /// # Errors
    /// The row did not end dead, or the state differs from the reset state.
    pub async fn worker_poison(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "worker_poison";
        self.reset(CHECK).await?;
        let none = self.probe(CHECK).await?;
        let consumer = self.consumer(CHECK);
        self.receive(CHECK, &consumer, msg).await?;
        let failing = self.worker(&consumer, Fault::Fail);
        let mut dead = 0;
        for _ in 0..self.config.worker.max_attempts.saturating_add(3) {
            let report = failing
                .run_once()
                .await
                .map_err(|e| CheckFailure::broken(CHECK, format!("a batch failed: {e}")))?;
            dead += report.dead;
            if dead > 0 {
                break;
            }
        }
        if dead == 0 {
            return Err(CheckFailure {
                check: CHECK,
                property: "a row that fails every time ends dead".to_owned(),
                expected: "dead".to_owned(),
                actual: "not dead after max_attempts batches".to_owned(),
                hint: "the handler committed the row's transaction itself (a COMMIT through \
                       `conn`)",
            });
        }
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a row dead after failing every time has no effect",
            &none,
            &found,
            "the handler writes outside the transaction it is given",
        )
    }

    /// The state one plain receipt and drain of `msg` leaves, from a reset.
    async fn worker_after_one(
        &self,
        check: &'static str,
        msg: &Envelope,
    ) -> Result<T, CheckFailure> {
        self.reset(check).await?;
        let none = self.probe(check).await?;
        let consumer = self.consumer(check);
        self.receive(check, &consumer, msg).await?;
        let done = self
            .drain(check, &self.worker(&consumer, Fault::None), 1)
            .await?;
        if done != 1 {
            return Err(CheckFailure::broken(
                check,
                format!("one plain receipt of the message ended with {done} rows done, not 1"),
            ));
        }
        Self::seen(check, &none, self.probe(check).await?)
    }

    /// Stores `msg` for `consumer`, as the receipt of a delivery.
    async fn receive(
        &self,
        check: &'static str,
        consumer: &ConsumerName,
        msg: &Envelope,
    ) -> Result<(), CheckFailure> {
        Inbox::new(self.store.clone(), consumer.clone())
            .store(msg)
            .await
            .map(drop)
            .map_err(|e| CheckFailure::broken(check, format!("the receipt failed: {e}")))
    }

    /// Runs batches until `expected` rows are done and a batch claims nothing (waiting, up to
    /// 10 s, for rows still locked by a killed worker's transaction, which the pool rolls back
    /// when it gets the connection back); the rows done.
    async fn drain(
        &self,
        check: &'static str,
        worker: &Worker<S, Faulty<H>>,
        expected: u64,
    ) -> Result<u64, CheckFailure> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut done = 0;
        let mut batches = 0;
        loop {
            let report = worker
                .run_once()
                .await
                .map_err(|e| CheckFailure::broken(check, format!("a batch failed: {e}")))?;
            done += report.done;
            batches += 1;
            if report.claimed > 0 {
                // A row failing after its handler is retried at once (no backoff here), up to
                // the worker's `max_attempts`: bounded.
                if batches > 50 + 10 * u64::from(self.config.worker.max_attempts) {
                    return Ok(done);
                }
                continue;
            }
            if done >= expected || tokio::time::Instant::now() >= deadline {
                return Ok(done);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A worker of `consumer` killed once its handler returned, before its commit (its
    /// transaction rolled back); then its claims reaped and the rows drained by another.
    async fn kill_a_worker_then_drain(
        &self,
        check: &'static str,
        consumer: &ConsumerName,
        rows: u64,
    ) -> Result<(), CheckFailure> {
        let (hang, ran) = Fault::hang();
        let killed = self.worker(consumer, hang);
        let batch = tokio::spawn(async move { killed.run_once().await });
        kill_when_ran(&ran, batch).await;
        self.reap(check).await?;
        self.drain(check, &self.worker(consumer, Fault::None), rows)
            .await
            .map(drop)
    }

    /// Returns the claims in flight to pending, as their leases' expiry would.
    async fn reap(&self, check: &'static str) -> Result<(), CheckFailure> {
        self.reaper()
            .reap_once(Some(SystemTime::now() + LATER))
            .await
            .map(drop)
            .map_err(|e| CheckFailure::broken(check, format!("the reaper failed: {e}")))
    }

    /// A reaper that dead-letters after the workers' `max_attempts`.
    fn reaper(&self) -> Reaper<S> {
        Reaper::new(
            self.store.clone(),
            ReaperConfig::default().max_attempts(self.config.worker.max_attempts),
        )
    }

    /// A worker of `consumer` with the user's handler and `fault` after it; retries are not
    /// delayed (the checks run batches back to back).
    fn worker(&self, consumer: &ConsumerName, fault: Fault) -> Worker<S, Faulty<H>> {
        let handler = Faulty {
            inner: Arc::clone(&self.handler),
            fault,
        };
        let config: WorkerConfig = self
            .config
            .worker
            .clone()
            .ladder(Ladder::constant(Duration::ZERO));
        Worker::new(self.store.clone(), consumer.clone(), handler, config)
    }
}
