//! The idempotent consumer: begin → claim → handle → commit, then the caller acks.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use tracing::{Instrument, debug, warn};

use crate::config::{AttemptCounting, ConflictPolicy, ProcessorConfig};
use crate::envelope::{ConsumerName, Envelope, PayloadHash};
use crate::error::{Error, HandlerError, StoreError, error_chain, is_retryable_code};
use crate::handler::Handler;
use crate::metrics as m;
use crate::store::{
    Claim, ClaimParams, DeadLetterParams, DeadLetterReason, DeadLettered, KeyParams, Store,
};

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
    /// [`ConflictPolicy::DeadLetter`], written to the dead-letter path.
    Conflict {
        /// Hash recorded when the key was first processed.
        stored: PayloadHash,
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
}

impl<S, H> Clone for Processor<S, H> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// A failed transaction attempt, before deciding between retry, requeue and dead letter.
enum Failure {
    Store(StoreError),
    Handler(HandlerError),
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
        Self {
            inner: Arc::new(Inner {
                store,
                consumer,
                handler,
                config,
                ready: tokio::sync::OnceCell::new(),
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

    /// The store.
    #[must_use]
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// Checks once that the database keeps acknowledged commits (see
    /// [`ProcessorConfig::allow_non_durable_commits`]). Called by the first `process`.
    ///
    /// # Errors
    /// [`StoreError::NonDurable`] naming the setting, or a store error reading it.
    pub async fn ensure_ready(&self) -> Result<(), Error> {
        if self.inner.config.allow_non_durable_commits {
            return Ok(());
        }
        self.inner
            .ready
            .get_or_try_init(|| async {
                self.inner.store.check_durability().await?;
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
        let span = tracing::info_span!(
            "inboxed.process",
            message_id = %envelope.id(),
            consumer = %self.inner.consumer,
            correlation_id = envelope.correlation_id(),
        );
        let result = self
            .process_inner(envelope, delivery_count)
            .instrument(span)
            .await;
        let consumer = self.inner.consumer.as_str().to_owned();
        match &result {
            Ok(outcome) => {
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
        result
    }

    async fn process_inner(
        &self,
        envelope: &Envelope,
        delivery_count: Option<u32>,
    ) -> Result<Outcome, Error> {
        self.ensure_ready().await?;
        let inner = &*self.inner;
        let key = KeyParams {
            consumer: &inner.consumer,
            message_id: envelope.id(),
        };
        let (attempt, durable) = match (inner.config.attempt_counting, delivery_count) {
            (AttemptCounting::Auto, Some(n)) => (n.max(1), false),
            _ => (
                self.with_contention_retries(|| inner.store.record_attempt(&key))
                    .await?,
                true,
            ),
        };
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
        let mut retries = 0;
        loop {
            let failure = match self.attempt_once(envelope, durable).await {
                Ok(claim) => return self.settle_claim(envelope, claim).await,
                Err(failure) => failure,
            };
            let contention = match &failure {
                Failure::Store(e) => e.is_transient(),
                Failure::Handler(HandlerError::Transient(e)) => is_contention(e.as_ref()),
                Failure::Handler(_) => false,
            };
            if contention && retries < inner.config.contention_retries {
                retries += 1;
                metrics::counter!(m::RETRIES_TOTAL, "consumer" => inner.consumer.as_str().to_owned())
                    .increment(1);
                debug!(retries, "inbox transaction hit contention; retrying");
                tokio::time::sleep(inner.config.contention_backoff.delay(retries)).await;
                continue;
            }
            return match failure {
                Failure::Store(e) => Err(e.into()),
                Failure::Handler(HandlerError::Permanent(e)) => {
                    let chain = error_chain(e.as_ref());
                    self.dead_letter(envelope, DeadLetterReason::Permanent, &chain, attempt)
                        .await
                }
                Failure::Handler(source) if attempt >= inner.config.max_attempts => {
                    let chain = error_chain(&source);
                    self.dead_letter(
                        envelope,
                        DeadLetterReason::AttemptsExhausted,
                        &chain,
                        attempt,
                    )
                    .await
                }
                Failure::Handler(source) => Err(Error::Handler {
                    consumer: inner.consumer.clone(),
                    attempt,
                    source,
                }),
            };
        }
    }

    /// One transaction: begin, claim, and for a new claim the handler and commit.
    /// Returns the claim when the transaction ended well (committed or nothing to do).
    async fn attempt_once(&self, envelope: &Envelope, durable: bool) -> Result<Claim, Failure> {
        let inner = &*self.inner;
        let key = KeyParams {
            consumer: &inner.consumer,
            message_id: envelope.id(),
        };
        let mut tx = inner
            .store
            .begin(&inner.config.begin_params())
            .await
            .map_err(Failure::Store)?;
        let started = Instant::now();
        let claim = inner
            .store
            .claim(
                &mut *tx,
                &ClaimParams {
                    consumer: &inner.consumer,
                    envelope,
                },
            )
            .await
            .map_err(Failure::Store)?;
        metrics::histogram!(m::CLAIM_WAIT_SECONDS, "consumer" => inner.consumer.as_str().to_owned())
            .record(started.elapsed().as_secs_f64());
        if claim == Claim::New {
            let started = Instant::now();
            let run = AssertUnwindSafe(inner.handler.handle(envelope, &mut *tx)).catch_unwind();
            let result = tokio::time::timeout(inner.config.handler_timeout, run).await;
            metrics::histogram!(m::HANDLER_DURATION_SECONDS, "consumer" => inner.consumer.as_str().to_owned())
                .record(started.elapsed().as_secs_f64());
            match result {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => return Err(Failure::Handler(e)),
                Ok(Err(panic)) => {
                    let msg = panic_message(panic.as_ref());
                    return Err(Failure::Handler(HandlerError::transient(format!(
                        "handler panicked: {msg}"
                    ))));
                }
                Err(_) => {
                    let msg = format!(
                        "handler exceeded its deadline of {:?}",
                        inner.config.handler_timeout
                    );
                    return Err(Failure::Handler(HandlerError::transient(msg)));
                }
            }
        }
        if durable && claim != Claim::DeadLettered {
            // The key is settled now (processed or duplicate): its attempt counter is history.
            inner
                .store
                .clear_attempts(&mut *tx, &key)
                .await
                .map_err(Failure::Store)?;
        }
        // A failed commit is ambiguous (it may have landed); requeueing is still right because
        // the redelivery's claim finds the row if it did.
        tx.commit()
            .await
            .map_err(|e| Failure::Store(S::classify(e)))?;
        Ok(claim)
    }

    async fn settle_claim(&self, envelope: &Envelope, claim: Claim) -> Result<Outcome, Error> {
        match claim {
            Claim::New => Ok(Outcome::Processed),
            Claim::DeadLettered => Ok(Outcome::AlreadyDeadLettered),
            Claim::Duplicate { stored_hash } => {
                let received = envelope.hash();
                match stored_hash {
                    Some(stored) if stored != received => {
                        self.conflict(envelope, stored, received).await
                    }
                    _ => Ok(Outcome::Duplicate),
                }
            }
        }
    }

    async fn conflict(
        &self,
        envelope: &Envelope,
        stored: PayloadHash,
        received: PayloadHash,
    ) -> Result<Outcome, Error> {
        warn!(%stored, %received, "message id already processed with a different payload");
        let dead_lettered = match self.inner.config.conflict_policy {
            ConflictPolicy::TreatAsDuplicate => false,
            ConflictPolicy::DeadLetter => {
                let err = format!("already processed with payload {stored}, received {received}");
                self.dead_letter(envelope, DeadLetterReason::Conflict, &err, 1)
                    .await?;
                true
            }
        };
        Ok(Outcome::Conflict {
            stored,
            received,
            dead_lettered,
        })
    }

    async fn dead_letter(
        &self,
        envelope: &Envelope,
        reason: DeadLetterReason,
        error: &str,
        attempts: u32,
    ) -> Result<Outcome, Error> {
        let inner = &*self.inner;
        let params = DeadLetterParams {
            consumer: &inner.consumer,
            message_id: Some(envelope.id()),
            message_type: envelope.message_type(),
            correlation_id: envelope.correlation_id(),
            payload: envelope.payload(),
            payload_hash: Some(envelope.hash()),
            reason,
            error,
            attempts,
        };
        match self
            .with_contention_retries(|| inner.store.dead_letter(&params))
            .await?
        {
            DeadLettered::AlreadyProcessed => Ok(Outcome::Duplicate),
            DeadLettered::Written => {
                warn!(
                    reason = reason.as_str(),
                    attempts, error, "message dead-lettered"
                );
                metrics::counter!(m::DEAD_LETTERS_TOTAL, "consumer" => inner.consumer.as_str().to_owned(), "reason" => reason.as_str())
                    .increment(1);
                Ok(Outcome::DeadLettered { reason })
            }
        }
    }

    /// Dead-letters a delivery that has no usable key, so it is neither processed without
    /// dedup nor dropped. The row has no message id and is never deduplicated.
    ///
    /// # Errors
    /// A store failure; the delivery must then be requeued.
    pub async fn dead_letter_invalid(
        &self,
        payload: &[u8],
        error: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> Result<Outcome, Error> {
        let inner = &*self.inner;
        let chain = error_chain(error);
        let params = DeadLetterParams {
            consumer: &inner.consumer,
            message_id: None,
            message_type: None,
            correlation_id: None,
            payload,
            payload_hash: Some(PayloadHash::of(payload)),
            reason: DeadLetterReason::InvalidMessage,
            error: &chain,
            attempts: 1,
        };
        self.with_contention_retries(|| inner.store.dead_letter(&params))
            .await?;
        warn!(
            error = chain,
            "delivery without a usable message id dead-lettered"
        );
        metrics::counter!(m::DEAD_LETTERS_TOTAL, "consumer" => inner.consumer.as_str().to_owned(), "reason" => "invalid_message")
            .increment(1);
        Ok(Outcome::DeadLettered {
            reason: DeadLetterReason::InvalidMessage,
        })
    }

    async fn with_contention_retries<T, F, Fut>(&self, mut op: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut retries = 0;
        loop {
            match op().await {
                Err(e) if e.is_transient() && retries < self.inner.config.contention_retries => {
                    retries += 1;
                    tokio::time::sleep(self.inner.config.contention_backoff.delay(retries)).await;
                }
                other => return other,
            }
        }
    }
}

/// A handler's transient error that is really database contention (serialization failure,
/// deadlock, SQLite busy): retried in process without counting an attempt.
fn is_contention(err: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    let Some(sqlx::Error::Database(db)) = err.downcast_ref::<sqlx::Error>() else {
        return false;
    };
    db.code()
        .is_some_and(|c| c != "55P03" && c != "57014" && is_retryable_code(&c))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
