//! The idempotent consumer: begin → claim → handle → commit, then the caller acks.

use std::sync::Arc;

use tracing::{Instrument, warn};

use crate::config::{AttemptCounting, ProcessorConfig};
use crate::crash::{CrashAttribution, Turn};
use crate::envelope::{ConsumerName, Envelope};
use crate::error::{Error, HandlerError, StoreError, error_chain};
use crate::handler::Handler;
use crate::hash::{PayloadHash, StoredHash};
use crate::metrics as m;
use crate::store::{Counted, DeadLetterReason, KeyParams, Store};
use crate::trace::spans;

/// How a message was settled. Every variant means "safe to ack": the effect is committed, or
/// was committed before, or the message is durably on the dead-letter path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The handler ran and its transaction, with the claim, committed.
    Processed,
    /// This consumer had already processed the key with the same payload; nothing ran.
    Duplicate,
    /// The key was already processed with a *different* payload. Logged at WARN and, under
    /// [`ConflictPolicy::DeadLetter`](crate::ConflictPolicy::DeadLetter), written to the dead-letter path.
    Conflict {
        /// What was recorded of the hash when the key was first processed.
        stored: StoredHash,
        /// Hash of the payload that arrived now.
        received: PayloadHash,
        /// Whether a dead letter was written for it.
        dead_lettered: bool,
    },
    /// The message was written to the dead-letter path now, without a processed row.
    DeadLettered {
        /// Why.
        reason: DeadLetterReason,
    },
    /// The key was already on the dead-letter path; nothing ran.
    AlreadyDeadLettered,
}

impl Outcome {
    /// The `outcome` label of [`metrics::MESSAGES_TOTAL`](crate::metrics::MESSAGES_TOTAL).
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Processed => "processed",
            Self::Duplicate => "duplicate",
            Self::Conflict { .. } => "conflict",
            Self::DeadLettered { .. } => "dead_lettered",
            Self::AlreadyDeadLettered => "already_dead_lettered",
        }
    }
}

/// Runs a [`Handler`] exactly once per `(message_id, consumer)` over a [`Store`].
///
/// # Transactions
/// Each call of [`Processor::process`] opens one transaction: claim, handler, commit. A
/// concurrent duplicate waits on the uncommitted claim for at most `lock_timeout`. Attempt
/// counting (when the broker gives no count) and dead letters use their own short transactions,
/// because they must survive the rollback of the handler's.
#[derive(Debug)]
pub struct Processor<S, H> {
    inner: Arc<Inner<S, H>>,
}

#[derive(Debug)]
struct Inner<S, H> {
    store: S,
    consumer: ConsumerName,
    handler: H,
    config: ProcessorConfig,
    ready: tokio::sync::OnceCell<()>,
    streak: crate::backoff::FailureStreak,
}

impl<S, H> Clone for Processor<S, H> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

mod attempt;
mod batch;
mod charge;
mod dead_letter;
mod operator;

pub(crate) use batch::BatchRun;

/// A failed transaction attempt, before deciding between retry, requeue and dead letter.
enum Failure {
    Store(StoreError),
    /// The claim (or the key locks taken as the transaction began) gave up waiting for another
    /// delivery's uncommitted claim, or the write lock: the handler never ran.
    KeyBusy(StoreError),
    Handler(HandlerError),
}

impl Failure {
    /// A store failure before the handler ran: a lock wait that timed out is
    /// [`Failure::KeyBusy`].
    fn before_handler(e: StoreError) -> Self {
        if matches!(e, StoreError::Timeout(_) | StoreError::Busy(_)) {
            Self::KeyBusy(e)
        } else {
            Self::Store(e)
        }
    }
}

impl<S: Store, H: Handler<S::Db>> Processor<S, H> {
    /// A processor with the default [`ProcessorConfig`].
    pub fn new(store: S, consumer: ConsumerName, handler: H) -> Self {
        Self::with_config(store, consumer, handler, ProcessorConfig::default())
    }

    /// A processor with explicit settings.
    pub fn with_config(
        store: S,
        consumer: ConsumerName,
        handler: H,
        config: ProcessorConfig,
    ) -> Self {
        config.crash_attribution.start();
        config.kill_switch.start(&consumer);
        Self {
            inner: Arc::new(Inner {
                store,
                consumer,
                handler,
                config,
                ready: tokio::sync::OnceCell::new(),
                streak: crate::backoff::FailureStreak::default(),
            }),
        }
    }

    /// The consumer name this processor records.
    #[must_use]
    pub fn consumer(&self) -> &ConsumerName {
        &self.inner.consumer
    }

    /// The settings.
    #[must_use]
    pub fn config(&self) -> &ProcessorConfig {
        &self.inner.config
    }

    /// Consecutive deliveries that failed for want of the database (shared by clones): the
    /// consumer loop's requeue backoff step when the broker keeps no delivery count.
    pub(crate) fn failure_streak(&self) -> &crate::backoff::FailureStreak {
        &self.inner.streak
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// Checks once that the database keeps acknowledged commits (see
    /// [`ProcessorConfig::allow_non_durable_commits`]) and registers the consumer with the
    /// store. Called by the first `process`.
    ///
    /// # Errors
    /// [`StoreError::NonDurable`] naming the setting, or a store error reading it or
    /// registering the consumer.
    pub async fn ensure_ready(&self) -> Result<(), Error> {
        let inner = &*self.inner;
        inner
            .ready
            .get_or_try_init(|| async {
                if !inner.config.allow_non_durable_commits {
                    let report = inner.store.check_durability().await?;
                    for warning in &report.warnings {
                        tracing::warn!(consumer = %inner.consumer, "{warning}");
                    }
                }
                inner.store.register_consumer(&inner.consumer).await?;
                Ok::<(), Error>(())
            })
            .await?;
        Ok(())
    }

    /// Processes one delivery of `envelope`. `delivery_count` is the broker's count for this
    /// delivery (1 on first delivery) when it has one; `None` uses the durable counter.
    ///
    /// `Ok` means settled: ack the delivery. `Err` means nothing was settled: requeue it (the
    /// transaction was rolled back; see [`Error::is_transient`]).
    ///
    /// # Errors
    /// A transient handler failure below `max_attempts`, a store failure that outlived the
    /// in-process retries, or a durability check that failed.
    pub async fn process(
        &self,
        envelope: &Envelope,
        delivery_count: Option<u32>,
    ) -> Result<Outcome, Error> {
        self.process_as(envelope, delivery_count, false, None).await
    }

    /// [`Processor::process`] of a delivery from `system` (the broker, for the span).
    pub(crate) async fn process_from(
        &self,
        envelope: &Envelope,
        delivery_count: Option<u32>,
        system: Option<&'static str>,
    ) -> Result<Outcome, Error> {
        self.process_as(envelope, delivery_count, false, system)
            .await
    }

    /// [`Processor::process`] as a probe between two attempts of an in-order delivery retried
    /// in place: a failure other than a permanent one is not charged (its attempt is forgiven)
    /// and never dead-letters the message. It tells whether the dependency is back sooner than
    /// the ladder's next step.
    pub(crate) async fn probe(
        &self,
        envelope: &Envelope,
        delivery_count: Option<u32>,
        system: Option<&'static str>,
    ) -> Result<Outcome, Error> {
        self.process_as(envelope, delivery_count, true, system)
            .await
    }

    async fn process_as(
        &self,
        envelope: &Envelope,
        delivery_count: Option<u32>,
        probe: bool,
        system: Option<&'static str>,
    ) -> Result<Outcome, Error> {
        // A delivery the broker counts as a redelivery links to its message's trace; a first
        // one (or one the broker does not count) continues it.
        let first = delivery_count.is_none_or(|n| n <= 1);
        let span = spans::process(system, &self.inner.consumer, envelope, None, first);
        let result = self
            .process_inner(envelope, delivery_count, probe)
            .instrument(span.clone())
            .await;
        spans::settled(&span, &result);
        self.count(envelope, &result);
        result
    }

    /// Counts a settled message by outcome, or a failure by kind; a processed one's lag.
    fn count(&self, envelope: &Envelope, result: &Result<Outcome, Error>) {
        let consumer = self.inner.consumer.as_str().to_owned();
        match result {
            Ok(outcome) => {
                if *outcome == Outcome::Processed
                    && let Some(sent_at) = envelope.sent_at()
                {
                    let lag = sent_at.elapsed().unwrap_or_default();
                    metrics::histogram!(m::LAG_SECONDS, "consumer" => consumer.clone())
                        .record(lag.as_secs_f64());
                }
                metrics::counter!(m::MESSAGES_TOTAL, "consumer" => consumer, "outcome" => outcome.as_str())
                    .increment(1);
            }
            Err(err) => {
                let kind = if matches!(err, Error::Handler { .. }) {
                    "handler"
                } else {
                    "store"
                };
                metrics::counter!(m::FAILURES_TOTAL, "consumer" => consumer, "kind" => kind)
                    .increment(1);
            }
        }
    }

    async fn process_inner(
        &self,
        envelope: &Envelope,
        delivery_count: Option<u32>,
        probe: bool,
    ) -> Result<Outcome, Error> {
        if let Err(e) = self.ensure_ready().await {
            // The store is not answering: an outage, for the kill switch, charging nothing.
            self.judge_transient(envelope, false).await;
            return Err(e);
        }
        let inner = &*self.inner;
        let key = KeyParams {
            consumer: &inner.consumer,
            message_id: envelope.id(),
        };
        let crash = &inner.config.crash_attribution;
        // Shared from before the count: a crash from here on is charged to this delivery.
        // Running from before the count too, so that a copy counted after it sees it.
        let shared = crash.shared().await;
        let _running = crash.running(&key);
        let counted = match (inner.config.attempt_counting, delivery_count) {
            // A first delivery, by the broker's count: nothing to read or write.
            (AttemptCounting::Auto, Some(n)) if n <= 1 => Counted::default(),
            _ => match self.record_attempt(&key).await {
                Ok(counted) => counted,
                Err(e) => {
                    self.judge_transient(envelope, false).await;
                    return Err(e.into());
                }
            },
        };
        let attempt = match (inner.config.attempt_counting, delivery_count) {
            (AttemptCounting::Auto, Some(n)) if n <= 1 => 1,
            // A redelivery is counted by the store, plus its uncounted first delivery: a
            // broker counts every delivery it handed out, run or not (at a crash, the whole
            // prefetch window), where the store counts those that ran.
            (AttemptCounting::Auto, Some(_)) => counted.attempts + 1,
            _ => counted.attempts.max(1),
        };
        let suspect = attempt <= inner.config.max_attempts && crash.is_suspect(&key, attempt);
        if !suspect {
            let _turn = shared;
            return self.process_counted(envelope, attempt, probe).await;
        }
        drop(shared);
        let (turn, grouped) = self.suspect_turn(&key, counted.forgiven).await?;
        let result = self.process_counted(envelope, attempt, probe).await;
        // The group goes on without this delivery while its forgiveness is taken back.
        drop(turn);
        if grouped && result.is_err() {
            // A failure seen here is this delivery's own: its attempt counts after all.
            if let Err(e) = self
                .with_contention_retries(|| inner.store.forgive(&key, -1))
                .await
            {
                warn!(error = %e, "could not count a failed attempt of a suspect delivery");
            }
        }
        result
    }

    /// The turn of a suspect delivery (the last crash may have been its doing; see
    /// [`CrashAttribution`](crate::CrashAttribution)): its attempt is forgiven while it waits
    /// until nothing but suspects runs in its scope, and it runs in their group, of at most
    /// [`CrashAttribution::group_limit`] of the times it was forgiven. Alone (no other suspect
    /// waiting, or a limit of one), the forgiveness is taken back as it starts: its next crash
    /// is charged to it only. In a group others may join it stays forgiven while it runs
    /// (`true`): a crash then is charged to none of the group, and each is forgiven once more,
    /// so the next group is half as large. The
    /// wait is bounded by `handler_timeout`; past it the delivery runs beside the others.
    async fn suspect_turn(
        &self,
        key: &KeyParams<'_>,
        forgiven: u32,
    ) -> Result<(Turn, bool), Error> {
        let inner = &*self.inner;
        let crash = &inner.config.crash_attribution;
        let limit = CrashAttribution::group_limit(forgiven);
        // Counted as waiting from before its forgiveness is written, so that a group that
        // opens meanwhile knows it may join.
        let waiting = crash.waiting("delivery", limit);
        let forgiving = self
            .with_contention_retries(|| inner.store.forgive(key, 1))
            .await;
        if let Err(e) = forgiving {
            drop(waiting);
            warn!(error = %e, "could not forgive a suspect delivery its wait; running it beside the others");
            return Ok((crash.shared().await, false));
        }
        let turn = crash.alone(waiting, inner.config.handler_timeout).await;
        if turn.is_together() {
            return Ok((turn, true));
        }
        // Alone, or past its wait: a crash from here on is this delivery's again. When this
        // fails the delivery is requeued without having run, and stays forgiven, as it should.
        self.with_contention_retries(|| inner.store.forgive(key, -1))
            .await?;
        Ok((turn, false))
    }

    /// The rest of [`Processor::process`], once this delivery's attempt is known (and, when
    /// counted by the store, committed). A `probe` ([`Processor::probe`]) is charged nothing
    /// unless the handler says the message is bad for good.
    async fn process_counted(
        &self,
        envelope: &Envelope,
        attempt: u32,
        probe: bool,
    ) -> Result<Outcome, Error> {
        let inner = &*self.inner;
        if attempt > inner.config.max_attempts {
            let err = format!(
                "{} deliveries failed, crashed or timed out (max_attempts = {})",
                attempt - 1,
                inner.config.max_attempts
            );
            return self
                .dead_letter(
                    envelope,
                    DeadLetterReason::AttemptsExhausted,
                    &err,
                    attempt - 1,
                )
                .await;
        }
        // An operator's redrive for this consumer lifts the key's dead letter inside the
        // transaction.
        let redrive = envelope.redrive_for() == Some(inner.consumer.as_str());
        let failure = match self.transaction(envelope, redrive).await {
            Ok(claim) => return self.settle_claim(envelope, claim).await,
            Err(failure) => failure,
        };
        let key = KeyParams {
            consumer: &inner.consumer,
            message_id: envelope.id(),
        };
        let failed_here = |attempt: u32| inner.config.crash_attribution.failed(&key, attempt);
        let (settled, chain) = match failure {
            Failure::Store(e) => {
                if probe {
                    self.forgive_attempt(&key).await;
                }
                failed_here(attempt);
                self.judge_transient(envelope, !probe).await;
                return Err(e.into());
            }
            Failure::KeyBusy(e) => {
                // Not an attempt: forgiven, so that waiting out the claim of a consumer cut off
                // mid-transaction (until the server ends its session) cannot dead-letter the
                // message. Before the requeue, which the redelivery follows.
                self.forgive_attempt(&key).await;
                failed_here(attempt.saturating_sub(1));
                return Err(e.into());
            }
            Failure::Handler(HandlerError::Permanent(e)) => {
                inner.config.kill_switch.succeeded();
                let chain = error_chain(e.as_ref());
                let reason = DeadLetterReason::Permanent;
                (
                    self.dead_letter(envelope, reason, &chain, attempt).await,
                    chain,
                )
            }
            Failure::Handler(source) => {
                // Not the message's fault, by the handler's word (or a probe, charged nothing):
                // its attempt is given back here, and the kill switch must not forgive it again.
                let retry_after = probe || matches!(source, HandlerError::RetryAfter { .. });
                if retry_after {
                    self.forgive_attempt(&key).await;
                }
                let spared = self.judge_transient(envelope, !retry_after).await;
                if retry_after || spared || attempt < inner.config.max_attempts {
                    failed_here(attempt);
                    return Err(Error::Handler {
                        consumer: inner.consumer.clone(),
                        attempt,
                        source,
                    });
                }
                let chain = error_chain(&source);
                let reason = DeadLetterReason::AttemptsExhausted;
                (
                    self.dead_letter(envelope, reason, &chain, attempt).await,
                    chain,
                )
            }
        };
        if settled.is_err() {
            failed_here(attempt);
        }
        if redrive && matches!(settled, Ok(Outcome::AlreadyDeadLettered)) {
            // The dead letter keeps its first reason and error: say what this retry hit.
            warn!(error = %chain, "an operator's redrive failed again; its dead letter stays as it was");
        }
        settled
    }
}
