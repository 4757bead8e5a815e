//! Processor settings: a plain struct, every field documented with its default.

use std::time::Duration;

use crate::backoff::Backoff;
use crate::crash::CrashAttribution;
use crate::kill_switch::KillSwitch;
use crate::ladder::Ladder;
use crate::rate_limit::RateLimit;
use crate::store::{BeginParams, Isolation};

/// What to do when a key arrives again with a *different* payload hash: a producer id
/// collision or an id reused for another message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ConflictPolicy {
    /// Log at WARN, count, and write a dead letter with both hashes, then ack. The default:
    /// a collision discards a real message, and nothing else would ever report it.
    #[default]
    DeadLetter,
    /// Log at WARN, count, and treat as a duplicate.
    TreatAsDuplicate,
}

/// Where the attempt number of a delivery comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AttemptCounting {
    /// A first delivery by the broker's delivery count (1) writes nothing; a redelivery, or
    /// a delivery without a count, is counted in the attempts table (a redelivery plus its
    /// uncounted first delivery). The broker's count itself is not the attempt: at a crash it
    /// counts every delivery it had handed the process, run or not. The default.
    #[default]
    Auto,
    /// Always the durable counter: one extra short transaction per delivery, but the count
    /// survives brokers that lose or reset theirs.
    Durable,
}

/// Settings for [`Processor`](crate::Processor).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProcessorConfig {
    /// Isolation of the inbox transaction. Defaults to [`Isolation::ReadCommitted`].
    pub isolation: Isolation,
    /// `lock_timeout` inside the inbox transaction: the longest a duplicate waits on another
    /// delivery's uncommitted claim. On SQLite it is the busy timeout, set on the connection as
    /// the transaction begins (the wait for the write lock). Defaults to 5 s.
    pub lock_timeout: Duration,
    /// `statement_timeout` inside the inbox transaction. Defaults to 30 s.
    pub statement_timeout: Duration,
    /// `idle_in_transaction_session_timeout` inside the inbox transaction, so a process that
    /// hangs between statements releases its claim. Defaults to 60 s.
    pub idle_in_transaction_timeout: Duration,
    /// Deadline for one handler call; past it the transaction is rolled back and the attempt
    /// fails as transient. Defaults to 30 s.
    pub handler_timeout: Duration,
    /// Deliveries (attempts) before a message goes to the dead-letter path. An attempt is
    /// counted before the handler runs, so a message that crashes the process still gets there.
    /// Defaults to 5.
    pub max_attempts: u32,
    /// In-process retries of one delivery after a serialization failure or deadlock. These are
    /// contention, not a fault of the message: retries within a delivery
    /// count no extra attempt. A delivery that still fails after them is requeued, and its
    /// redelivery is the next attempt. Defaults to 5.
    pub contention_retries: u32,
    /// Backoff between those in-process retries. Defaults to 5 ms base, 500 ms cap.
    pub contention_backoff: Backoff,
    /// Delays the consumer loop asks the broker for when it requeues a failed delivery, by the
    /// attempt that failed; what each broker does with a delay is in docs/failures.md.
    /// Defaults to [`Ladder::default`]: 1 s, 10 s, 1 min, 5 min, 15 min.
    pub ladder: Ladder,
    /// Same key, different payload. Defaults to [`ConflictPolicy::DeadLetter`].
    pub conflict_policy: ConflictPolicy,
    /// Source of attempt numbers. Defaults to [`AttemptCounting::Auto`].
    pub attempt_counting: AttemptCounting,
    /// Run even when the database can lose acknowledged commits (`synchronous_commit = off`,
    /// `fsync = off`, SQLite `synchronous` below FULL). Commit-then-ack is void on such a
    /// setting. Defaults to `false`.
    pub allow_non_durable_commits: bool,
    /// Write dead letters without their payload (its hash is kept, for conflict detection and
    /// to recognise a redelivery), because payloads may hold personal data. A redacted dead
    /// letter cannot be retried from the table; the producer must resend. Defaults to `false`.
    pub redact_dead_letter_payloads: bool,
    /// What a crash is charged to: work that may have caused the last crash runs alone in
    /// this scope, so that a message that kills its process does not use up the attempts of
    /// the work beside it ([`CrashAttribution`]). Clones of a config share the scope; give
    /// every config of a process one value to judge all its work together. Defaults to a new
    /// [`CrashAttribution::new`] (on, 60 s window).
    pub crash_attribution: CrashAttribution,
    /// What pauses the consumer when deliveries of many distinct messages fail transiently (a
    /// downstream service or the database is down), so that an outage uses up no message's
    /// attempts ([`KillSwitch`]). Clones of a config share it. Defaults to a new [`KillSwitch::new`]
    /// (opens when 10 distinct messages failed among the last 20 deliveries that ran, probes after 5 s,
    /// then at most every minute).
    pub kill_switch: KillSwitch,
    /// How fast deliveries reach the handler, overall and per bucket, each permit taken before
    /// the inbox transaction begins ([`RateLimit`]). Clones of a config share it. Defaults to
    /// [`RateLimit::none`].
    pub rate_limit: RateLimit,
}

impl Default for ProcessorConfig {
    fn default() -> Self {
        Self {
            isolation: Isolation::ReadCommitted,
            lock_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(30),
            idle_in_transaction_timeout: Duration::from_secs(60),
            handler_timeout: Duration::from_secs(30),
            max_attempts: 5,
            contention_retries: 5,
            contention_backoff: Backoff {
                base: Duration::from_millis(5),
                max: Duration::from_millis(500),
            },
            ladder: Ladder::default(),
            conflict_policy: ConflictPolicy::DeadLetter,
            attempt_counting: AttemptCounting::Auto,
            allow_non_durable_commits: false,
            redact_dead_letter_payloads: false,
            crash_attribution: CrashAttribution::new(),
            kill_switch: KillSwitch::new(),
            rate_limit: RateLimit::none(),
        }
    }
}

impl ProcessorConfig {
    /// Sets [`ProcessorConfig::crash_attribution`].
    #[must_use]
    pub fn crash_attribution(mut self, attribution: CrashAttribution) -> Self {
        self.crash_attribution = attribution;
        self
    }

    /// Sets [`ProcessorConfig::kill_switch`].
    #[must_use]
    pub fn kill_switch(mut self, switch: KillSwitch) -> Self {
        self.kill_switch = switch;
        self
    }

    /// Sets [`ProcessorConfig::isolation`].
    #[must_use]
    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    /// Sets [`ProcessorConfig::max_attempts`] (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets [`ProcessorConfig::handler_timeout`].
    #[must_use]
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = timeout;
        self
    }

    /// Sets [`ProcessorConfig::statement_timeout`].
    #[must_use]
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = timeout;
        self
    }

    /// Sets [`ProcessorConfig::idle_in_transaction_timeout`]: how long a claim can outlive a
    /// consumer cut off from the database mid-transaction, holding its redelivery's claim on
    /// another consumer.
    #[must_use]
    pub fn idle_in_transaction_timeout(mut self, timeout: Duration) -> Self {
        self.idle_in_transaction_timeout = timeout;
        self
    }

    /// Sets [`ProcessorConfig::lock_timeout`].
    #[must_use]
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Sets [`ProcessorConfig::conflict_policy`].
    #[must_use]
    pub fn conflict_policy(mut self, policy: ConflictPolicy) -> Self {
        self.conflict_policy = policy;
        self
    }

    /// Sets [`ProcessorConfig::attempt_counting`].
    #[must_use]
    pub fn attempt_counting(mut self, counting: AttemptCounting) -> Self {
        self.attempt_counting = counting;
        self
    }

    /// Sets [`ProcessorConfig::rate_limit`].
    #[must_use]
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limit = limit;
        self
    }

    /// Sets [`ProcessorConfig::ladder`].
    #[must_use]
    pub fn ladder(mut self, ladder: Ladder) -> Self {
        self.ladder = ladder;
        self
    }

    /// Sets [`ProcessorConfig::allow_non_durable_commits`]. Read its documentation first.
    #[must_use]
    pub fn allow_non_durable_commits(mut self, allow: bool) -> Self {
        self.allow_non_durable_commits = allow;
        self
    }

    /// Sets [`ProcessorConfig::redact_dead_letter_payloads`].
    #[must_use]
    pub fn redact_dead_letter_payloads(mut self, redact: bool) -> Self {
        self.redact_dead_letter_payloads = redact;
        self
    }

    /// What a dead letter stores of `payload`: nothing when redacting.
    pub(crate) fn dead_letter_payload<'a>(&self, payload: &'a [u8]) -> &'a [u8] {
        if self.redact_dead_letter_payloads {
            &[]
        } else {
            payload
        }
    }

    pub(crate) fn begin_params(&self) -> BeginParams {
        BeginParams {
            isolation: self.isolation,
            lock_timeout: self.lock_timeout,
            statement_timeout: self.statement_timeout,
            idle_in_transaction_timeout: self.idle_in_transaction_timeout,
            durable_commit: true,
        }
    }

    /// Sets [`ProcessorConfig::contention_retries`].
    #[must_use]
    pub fn contention_retries(mut self, contention_retries: u32) -> Self {
        self.contention_retries = contention_retries;
        self
    }

    /// Sets [`ProcessorConfig::contention_backoff`].
    #[must_use]
    pub fn contention_backoff(mut self, contention_backoff: Backoff) -> Self {
        self.contention_backoff = contention_backoff;
        self
    }
}
