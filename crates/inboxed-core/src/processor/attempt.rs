//! One inbox transaction: begin, claim, handler, the settling statement, commit; retried in
//! process on contention, and what its claim comes to.

use std::time::Instant;

use tracing::debug;

use super::{Failure, Outcome, Processor};
use crate::driver::{Driver, Transaction as _};
use crate::envelope::Envelope;
use crate::error::{Error, HandlerError, StoreError, error_chain};
use crate::handler::{Handler, call_guarded};
use crate::metrics as m;
use crate::store::{Claim, ClaimParams, KeyParams, Store};

impl<S: Store, H: Handler<S::Db>> Processor<S, H> {
    /// Returns the claim when the transaction ended well (committed, or nothing to do).
    /// `retry` first deletes the key's dead letter in the same transaction (an operator's
    /// retry), so it is gone only if the retry commits.
    pub(super) async fn attempt_once(
        &self,
        envelope: &Envelope,
        retry: bool,
    ) -> Result<Claim, Failure> {
        let inner = &*self.inner;
        let key = KeyParams {
            consumer: &inner.consumer,
            message_id: envelope.id(),
        };
        let started = Instant::now();
        let params = ClaimParams {
            consumer: &inner.consumer,
            envelope,
        };
        let begin = inner.config.begin_params();
        let (mut tx, claim) = if retry {
            // An operator's retry: its dead letter goes in the same transaction, before the
            // claim, so that it is gone only if the retry commits.
            let ids = [envelope.id().as_str()];
            let mut tx = inner
                .store
                .begin_claims(&begin, &inner.consumer, &ids)
                .await
                .map_err(Failure::before_handler)?;
            inner
                .store
                .delete_dead_letter(&mut *tx, &key)
                .await
                .map_err(Failure::Store)?;
            let claim = inner
                .store
                .claim(&mut *tx, &params)
                .await
                .map_err(Failure::before_handler)?;
            (tx, claim)
        } else {
            inner
                .store
                .begin_and_claim(&begin, &params)
                .await
                .map_err(Failure::before_handler)?
        };
        metrics::histogram!(m::CLAIM_WAIT_SECONDS, "consumer" => inner.consumer.as_str().to_owned())
            .record(started.elapsed().as_secs_f64());
        if claim == Claim::New
            && let Err(failure) = self.run_handler(envelope, &mut tx).await
        {
            // Roll back now, not whenever the pool next touches the connection: the claim's
            // row lock goes at once, so a waiting duplicate proceeds, and the dead letter
            // that may follow cannot commit while this claim still stands.
            let _ = tx.rollback().await;
            return Err(failure);
        }
        // Always one statement between the handler and the commit. It forgets the attempt
        // counter of the key, which is settled now. It is also the probe for a handler that
        // swallowed a failure which ended the transaction: on PostgreSQL the transaction is
        // then aborted, and COMMIT would roll it back while reporting success; on MySQL a
        // deadlock rolled it back, and COMMIT would commit only what ran after it. Either
        // would ack a message whose effect and claim are gone. A failed commit is ambiguous
        // (it may have landed); requeueing is still right because the redelivery's claim
        // finds the row if it did.
        match inner.store.settle_and_commit(tx, &key).await {
            Ok(()) => Ok(claim),
            Err(e @ StoreError::TransactionEnded(_)) => {
                Err(Failure::Handler(HandlerError::transient(format!(
                    "the handler returned Ok after a statement inside it had failed and ended \
                     the transaction; propagate database errors with `?` ({})",
                    error_chain(&e)
                ))))
            }
            Err(e) => Err(Failure::Store(e)),
        }
    }

    /// Runs the handler under its deadline, with panics caught, and records its duration.
    async fn run_handler(
        &self,
        envelope: &Envelope,
        tx: &mut <S::Db as Driver>::Transaction,
    ) -> Result<(), Failure> {
        let inner = &*self.inner;
        let started = Instant::now();
        let result = call_guarded(
            &inner.handler,
            envelope,
            &mut **tx,
            inner.config.handler_timeout,
        )
        .await;
        metrics::histogram!(m::HANDLER_DURATION_SECONDS, "consumer" => inner.consumer.as_str().to_owned())
            .record(started.elapsed().as_secs_f64());
        result.map_err(Failure::Handler)
    }

    /// The inbox transaction, retried in process while it fails on contention (serialization
    /// failure, deadlock), whether in the claim, the commit or the handler.
    pub(super) async fn transaction(
        &self,
        envelope: &Envelope,
        retry: bool,
    ) -> Result<Claim, Failure> {
        let inner = &*self.inner;
        let mut retries = 0;
        loop {
            let failure = match self.attempt_once(envelope, retry).await {
                Ok(claim) => return Ok(claim),
                Err(failure) => failure,
            };
            let contention = match &failure {
                Failure::Store(e) => e.is_contention(),
                Failure::Handler(HandlerError::Transient(e)) => e
                    .downcast_ref::<StoreError>()
                    .is_some_and(StoreError::is_contention),
                Failure::Handler(_) | Failure::KeyBusy(_) => false,
            };
            if !contention || retries >= inner.config.contention_retries {
                return Err(failure);
            }
            retries += 1;
            metrics::counter!(m::RETRIES_TOTAL, "consumer" => inner.consumer.as_str().to_owned())
                .increment(1);
            debug!(retries, "inbox transaction hit contention; retrying");
            tokio::time::sleep(inner.config.contention_backoff.delay(retries)).await;
        }
    }

    pub(super) async fn settle_claim(
        &self,
        envelope: &Envelope,
        claim: Claim,
    ) -> Result<Outcome, Error> {
        match claim {
            Claim::New => {
                self.inner.config.kill_switch.succeeded();
                Ok(Outcome::Processed)
            }
            Claim::DeadLettered => Ok(Outcome::AlreadyDeadLettered),
            Claim::Duplicate { stored } => {
                let received = envelope.hash();
                match stored {
                    Some(stored) if !stored.matches(&received) => {
                        self.conflict(envelope, stored, received).await
                    }
                    _ => Ok(Outcome::Duplicate),
                }
            }
        }
    }

    pub(super) async fn with_contention_retries<T, F, Fut>(&self, op: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let config = &self.inner.config;
        config
            .contention_backoff
            .retrying(config.contention_retries, StoreError::is_transient, op)
            .await
    }
}
