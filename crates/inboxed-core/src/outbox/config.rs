//! Settings of the outbox relay.

use std::time::Duration;

use crate::backoff::Backoff;
use crate::crash::CrashAttribution;
use crate::inbox::ClaimMode;

/// Settings for [`OutboxRelay`](super::OutboxRelay).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OutboxRelayConfig {
    /// How a batch's rows are held while they are published. [`ClaimMode::LockHeld`]: one
    /// transaction locks the rows, stays open through the publish and marks them, so a row
    /// costs one new version (none with `sent_retention` zero) and a batch one commit, and a
    /// dead relay's rows come free as its connection closes; each loop then uses two
    /// connections at once (its transaction's, and one for a moment to record the batch).
    /// [`ClaimMode::Lease`]: the rows are claimed in a transaction of their own and marked in
    /// a second (the only mode on SQLite, where an open transaction would hold the database's
    /// one write lock through the publish). docs/bench/runs.md, "The outbox", measures both.
    /// Defaults to `None`: lock-held where the engine can ([`OutboxStore::locks_outbox`]:
    /// PostgreSQL), a lease elsewhere.
    ///
    /// [`OutboxStore::locks_outbox`]: super::store::OutboxStore::locks_outbox
    pub claim_mode: Option<ClaimMode>,
    /// Rows per claim, published as one pipelined batch whose confirmations are awaited
    /// together. Each batch costs two statements (its claim and its mark) whatever its size,
    /// so a larger batch drains a backlog faster (docs/bench/runs.md, "The outbox", measures 100,
    /// 500 and 1,000); with little traffic a claim takes what there is, so the size does not
    /// add latency. Defaults to 500.
    pub batch_size: u32,
    /// Claim loops running at once, each with its own batch: one publishes while another
    /// claims or marks. Defaults to 2.
    pub concurrency: usize,
    /// How long a claim holds before another relay may publish its rows again: longer than a
    /// batch's publish and confirmation can take (the publisher's own timeouts), or rows are
    /// sent twice (still under one id). Under [`ClaimMode::LockHeld`] the longest a batch's
    /// transaction may sit idle through a publish before the server ends it (its rows then
    /// come free, and are sent again under the same ids). Defaults to 30 s.
    pub lease: Duration,
    /// Wait on the engine's notification of committed outbox writes (PostgreSQL's
    /// LISTEN/NOTIFY; other engines poll). Defaults to `true`.
    pub notify: bool,
    /// How long an idle loop waits before it claims again, woken sooner by a notification.
    /// Jittered by ±50 %. Defaults to 250 ms.
    pub poll_interval: Duration,
    /// At this many attempts a refused or unconfirmed row is dead instead of retried.
    /// Defaults to 10.
    pub max_attempts: u32,
    /// Delay before a refused or unconfirmed row is tried again, by attempt. Defaults to 1 s
    /// doubling to 5 min, with jitter.
    pub backoff: Backoff,
    /// Pause of a loop after the broker was unreachable or the database failed, by
    /// consecutive failure. Defaults to 100 ms doubling to 10 s, with jitter.
    pub reconnect: Backoff,
    /// How often expired claims (of a relay that died) are returned to pending. Defaults
    /// to 5 s.
    pub reap_interval: Duration,
    /// How long a sent row is kept before the relay deletes it (at its pass over expired
    /// claims, in batches of 1,000), as a record of what was published and what caused it;
    /// `None` keeps every row. `Some(Duration::ZERO)` keeps none: a confirmed row is deleted
    /// at once in place of being marked sent, which costs the database one row version less a
    /// message (docs/bench/runs.md, "The outbox"), at the price of the record of what was sent and
    /// of the operator's sent-per-second figure. Dead rows are never deleted: they wait for an
    /// operator. Defaults to 7 days.
    pub sent_retention: Option<Duration>,
    /// How long batches in flight may take to finish at shutdown. Defaults to 10 s.
    pub shutdown_grace: Duration,
    /// What a crash is charged to: a batch holding rows whose earlier batch died (marked by
    /// the crash halving) waits until no other batch of this scope runs, at most half a lease,
    /// and runs alone, so that if it kills the process only its rows are charged
    /// ([`CrashAttribution`]). Clones of a config share the scope. Defaults to a new
    /// [`CrashAttribution::new`].
    pub crash_attribution: CrashAttribution,
}

impl Default for OutboxRelayConfig {
    fn default() -> Self {
        Self {
            claim_mode: None,
            batch_size: 500,
            concurrency: 2,
            lease: Duration::from_secs(30),
            notify: true,
            poll_interval: Duration::from_millis(250),
            max_attempts: 10,
            backoff: Backoff {
                base: Duration::from_secs(1),
                max: Duration::from_secs(300),
            },
            reconnect: Backoff {
                base: Duration::from_millis(100),
                max: Duration::from_secs(10),
            },
            reap_interval: Duration::from_secs(5),
            sent_retention: Some(Duration::from_secs(7 * 86_400)),
            shutdown_grace: Duration::from_secs(10),
            crash_attribution: CrashAttribution::new(),
        }
    }
}

impl OutboxRelayConfig {
    /// Sets [`OutboxRelayConfig::crash_attribution`].
    #[must_use]
    pub fn crash_attribution(mut self, attribution: CrashAttribution) -> Self {
        self.crash_attribution = attribution;
        self
    }

    /// Sets [`OutboxRelayConfig::claim_mode`].
    #[must_use]
    pub fn claim_mode(mut self, mode: ClaimMode) -> Self {
        self.claim_mode = Some(mode);
        self
    }

    /// Sets [`OutboxRelayConfig::batch_size`] (at least 1).
    #[must_use]
    pub fn batch_size(mut self, n: u32) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// Sets [`OutboxRelayConfig::concurrency`] (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Sets [`OutboxRelayConfig::lease`].
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets [`OutboxRelayConfig::notify`].
    #[must_use]
    pub fn notify(mut self, on: bool) -> Self {
        self.notify = on;
        self
    }

    /// Sets [`OutboxRelayConfig::poll_interval`].
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every;
        self
    }

    /// Sets [`OutboxRelayConfig::max_attempts`] (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets [`OutboxRelayConfig::backoff`].
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets [`OutboxRelayConfig::sent_retention`].
    #[must_use]
    pub fn sent_retention(mut self, keep: Option<Duration>) -> Self {
        self.sent_retention = keep;
        self
    }

    /// Sets [`OutboxRelayConfig::reap_interval`].
    #[must_use]
    pub fn reap_interval(mut self, every: Duration) -> Self {
        self.reap_interval = every;
        self
    }

    /// Sets [`OutboxRelayConfig::reconnect`].
    #[must_use]
    pub fn reconnect(mut self, reconnect: Backoff) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// Sets [`OutboxRelayConfig::shutdown_grace`].
    #[must_use]
    pub fn shutdown_grace(mut self, shutdown_grace: Duration) -> Self {
        self.shutdown_grace = shutdown_grace;
        self
    }
}
