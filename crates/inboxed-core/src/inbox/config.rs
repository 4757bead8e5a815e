//! Worker and reaper settings.

use std::time::Duration;

use crate::crash::CrashAttribution;
use crate::kill_switch::KillSwitch;
use crate::ladder::Ladder;
use crate::rate_limit::RateLimit;
use crate::store::BeginParams;

/// What a dead row does to the later rows of its aggregate in ordered mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnDead {
    /// Hold them back (the aggregate is parked) until an operator replays the dead row. The
    /// default: processing later events of an aggregate past a failed one usually breaks it.
    #[default]
    Park,
    /// Let them go on.
    Skip,
}

/// How a worker holds the rows it processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ClaimMode {
    /// A fenced lease: rows are claimed in a transaction of their own (set to `processing`
    /// with a token and an expiry), processed in a second one, and returned by the reaper if
    /// the worker dies. Handlers may run for as long as the heartbeat keeps the lease. The
    /// default; the only mode on SQLite.
    #[default]
    Lease,
    /// The row lock is the lease: one transaction locks the rows (`FOR UPDATE SKIP LOCKED`),
    /// runs the handlers and completes them, so a batch costs one commit instead of two, and a
    /// dead worker's rows come back as soon as its connection closes. The transaction (and its
    /// locks) stays open for the whole batch: for short handlers. PostgreSQL only.
    LockHeld,
}

/// Settings for [`Worker`](super::Worker).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// How rows are held while they are processed. Defaults to [`ClaimMode::Lease`].
    pub claim_mode: ClaimMode,
    /// The most claim loops running at once, each with its own batch. Capped by the store
    /// (SQLite: 1). Defaults to 4.
    pub concurrency: usize,
    /// Run only as many of the `concurrency` loops as the database serves well: start with
    /// one, add one while full batches take about as long per row as the best seen (the mean
    /// of a few batches, within 1.5×), give one up when that time doubles. Workers registered
    /// on one PostgreSQL or MySQL database (`liveness`) also share its loops: among `n` of
    /// them each runs at most `concurrency / n` (rounded up, one at least), since 16 workers
    /// of four loops each drained slower on two cores than one worker alone. On MySQL, once
    /// more workers are registered than `concurrency`, their loops also take turns at the
    /// database's batch gate (`concurrency` named locks, one held per running batch), so that
    /// together they run at most `concurrency` batches at once: one loop each was still 16
    /// batches at once for 16 workers, which drained at 0.50 to 0.77 of one worker's rate on
    /// MariaDB (0.94 gated). A worker whose rows wait on something else (an HTTP call) and
    /// runs alone keeps them all; many such workers sharing a database want this off.
    /// `false`: always `concurrency` loops, ungated. Defaults to `true`.
    pub adaptive_concurrency: bool,
    /// Rows per claim. With a handler that has a `handle_batch` of its own they share one
    /// transaction and one commit; with only `handle`, each row runs in a transaction of its
    /// own (the claim is still shared). Defaults to 50.
    pub batch_size: u32,
    /// How long a claim holds before the reaper may hand the row to another worker: how long
    /// the rows of a worker that hangs (or dies unseen: see `liveness`) wait. Defaults to 30 s.
    pub lease: Duration,
    /// How often a running batch extends its lease. Defaults to 10 s.
    pub heartbeat: Duration,
    /// Wait after a claim that found nothing, with jitter; with wake-ups on, the longest an
    /// idle worker waits for one. Defaults to 100 ms.
    pub poll_interval: Duration,
    /// Wake idle workers as soon as a row is stored (PostgreSQL `LISTEN/NOTIFY`, one dedicated
    /// connection per worker). Turn it off behind a transaction-pooling PgBouncer, where
    /// `LISTEN` does not work; workers then poll. Defaults to `true`.
    pub notify: bool,
    /// Register the worker while [`Worker::run`](super::Worker::run) runs (PostgreSQL: a
    /// session advisory lock, MySQL: a named lock, each on one more connection of its own), so
    /// that if its process dies the reaper returns its rows at its next pass instead of after
    /// their lease. Turn it off behind a transaction-pooling PgBouncer, with `notify`: a
    /// session lock there outlives the process or vanishes under it (a store with persistent
    /// statements off, as behind such a proxy, registers nothing anyway). Without it, or on
    /// SQLite, a dead worker's rows wait for their lease. Defaults to `true`.
    pub liveness: bool,
    /// Claims before a failing row goes dead. Counted at claim time, so a row whose handler
    /// kills its worker gets there too: after about log2 of the rows its process held of
    /// deaths charged to no one (the reaper halves its group until it runs alone), then this
    /// many. Defaults to 5.
    pub max_attempts: u32,
    /// Delay before a failed row is claimable again, by the attempt that failed; the row keeps
    /// it (`available_at`), so it survives a restart. Defaults to [`Ladder::default`]: 1 s,
    /// 10 s, 1 min, 5 min, 15 min.
    pub ladder: Ladder,
    /// Per-aggregate ordering: never two rows of one aggregate in flight, arrival order within
    /// an aggregate. Defaults to `false`.
    pub ordered: bool,
    /// In ordered mode, what a dead row does to its aggregate. Defaults to [`OnDead::Park`].
    pub on_dead: OnDead,
    /// Deadline of one handler call per message (a `handle_batch` call gets it times its
    /// number of messages). Defaults to 30 s.
    pub handler_timeout: Duration,
    /// On shutdown, how long in-flight batches may take before their rows are handed back.
    /// Defaults to 30 s.
    pub shutdown_grace: Duration,
    /// Bounds of the batch transaction: set through [`WorkerConfig::isolation`],
    /// [`WorkerConfig::lock_timeout`], [`WorkerConfig::statement_timeout`] and
    /// [`WorkerConfig::idle_in_transaction_timeout`]. Defaults to READ COMMITTED, 5 s lock,
    /// 30 s statement, 60 s idle.
    pub(crate) begin: BeginParams,
    /// What a crash is charged to: a batch holding rows whose earlier claim died (the
    /// reaper's crash halving marked them) waits until no other batch of this scope runs, at
    /// most half a lease, and runs alone, so that if it kills the process the reaper finds
    /// only its rows held ([`CrashAttribution`]). Clones of a config share the scope.
    /// Defaults to a new [`CrashAttribution::new`].
    pub crash_attribution: CrashAttribution,
    /// What stops the claim loops when rows of many distinct messages fail transiently (a
    /// downstream service or the database is down), so that an outage uses up no row's
    /// attempts ([`KillSwitch`]; in lease mode). Clones of a config share it. Defaults to a new
    /// [`KillSwitch::new`].
    pub kill_switch: KillSwitch,
    /// How fast rows reach the handler, overall and per bucket ([`RateLimit`]): a claim takes at
    /// most as many rows as the overall limit has permits at hand, and a claimed row over its
    /// bucket's limit is handed back, its attempt given back, to be claimed again at its slot.
    /// Clones of a config share it. Defaults to [`RateLimit::none`].
    pub rate_limit: RateLimit,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            claim_mode: ClaimMode::Lease,
            concurrency: 4,
            adaptive_concurrency: true,
            batch_size: 50,
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(10),
            poll_interval: Duration::from_millis(100),
            notify: true,
            liveness: true,
            max_attempts: 5,
            ladder: Ladder::default(),
            ordered: false,
            on_dead: OnDead::Park,
            handler_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            begin: BeginParams::default(),
            crash_attribution: CrashAttribution::new(),
            kill_switch: KillSwitch::new(),
            rate_limit: RateLimit::none(),
        }
    }
}

impl WorkerConfig {
    /// Sets [`WorkerConfig::kill_switch`].
    #[must_use]
    pub fn kill_switch(mut self, switch: KillSwitch) -> Self {
        self.kill_switch = switch;
        self
    }

    /// Sets [`WorkerConfig::rate_limit`].
    #[must_use]
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limit = limit;
        self
    }

    /// Sets [`WorkerConfig::crash_attribution`].
    #[must_use]
    pub fn crash_attribution(mut self, attribution: CrashAttribution) -> Self {
        self.crash_attribution = attribution;
        self
    }

    /// Sets [`WorkerConfig::claim_mode`].
    #[must_use]
    pub fn claim_mode(mut self, mode: ClaimMode) -> Self {
        self.claim_mode = mode;
        self
    }

    /// Sets [`WorkerConfig::concurrency`] (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Sets [`WorkerConfig::adaptive_concurrency`].
    #[must_use]
    pub fn adaptive_concurrency(mut self, on: bool) -> Self {
        self.adaptive_concurrency = on;
        self
    }

    /// Sets [`WorkerConfig::batch_size`] (at least 1).
    #[must_use]
    pub fn batch_size(mut self, n: u32) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// Sets [`WorkerConfig::lease`].
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets [`WorkerConfig::heartbeat`].
    #[must_use]
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// Sets [`WorkerConfig::poll_interval`].
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every;
        self
    }

    /// Sets [`WorkerConfig::notify`].
    #[must_use]
    pub fn notify(mut self, on: bool) -> Self {
        self.notify = on;
        self
    }

    /// Sets [`WorkerConfig::liveness`].
    #[must_use]
    pub fn liveness(mut self, on: bool) -> Self {
        self.liveness = on;
        self
    }

    /// Sets [`WorkerConfig::max_attempts`] (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets [`WorkerConfig::ladder`].
    #[must_use]
    pub fn ladder(mut self, ladder: Ladder) -> Self {
        self.ladder = ladder;
        self
    }

    /// Sets [`WorkerConfig::ordered`] and [`WorkerConfig::on_dead`].
    #[must_use]
    pub fn ordered(mut self, ordered: bool, on_dead: OnDead) -> Self {
        self.ordered = ordered;
        self.on_dead = on_dead;
        self
    }

    /// Sets [`WorkerConfig::handler_timeout`].
    #[must_use]
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = timeout;
        self
    }

    /// Sets [`WorkerConfig::shutdown_grace`].
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Sets [`WorkerConfig::on_dead`].
    #[must_use]
    pub fn on_dead(mut self, on_dead: OnDead) -> Self {
        self.on_dead = on_dead;
        self
    }

    /// The batch transaction's isolation level. Defaults to READ COMMITTED.
    #[must_use]
    pub fn isolation(mut self, isolation: crate::store::Isolation) -> Self {
        self.begin.isolation = isolation;
        self
    }

    /// The longest wait for a row lock in the batch transaction. Defaults to 5 s.
    #[must_use]
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.begin.lock_timeout = timeout;
        self
    }

    /// The longest single statement in the batch transaction. Defaults to 30 s.
    #[must_use]
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.begin.statement_timeout = timeout;
        self
    }

    /// The longest idle gap inside the batch transaction before the server ends the session,
    /// so that a hung worker cannot hold its rows for ever. Defaults to 60 s.
    #[must_use]
    pub fn idle_in_transaction_timeout(mut self, timeout: Duration) -> Self {
        self.begin.idle_in_transaction_timeout = timeout;
        self
    }
}
