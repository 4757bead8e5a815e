//! The dead-letter paths: permanent failures, exhausted attempts, payload conflicts and
//! deliveries without a usable key. Each is written in its own transaction, because the
//! handler's was rolled back, and never as a processed row.

use tracing::warn;

use super::{Outcome, Processor};
use crate::config::ConflictPolicy;
use crate::envelope::Envelope;
use crate::error::{Error, error_chain};
use crate::handler::Handler;
use crate::hash::{PayloadHash, StoredHash};
use crate::metrics as m;
use crate::store::{DeadLetterParams, DeadLetterReason, DeadLettered, Store};

impl<S: Store, H: Handler<S::Db>> Processor<S, H> {
    pub(super) async fn conflict(
        &self,
        envelope: &Envelope,
        stored: StoredHash,
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

    pub(super) async fn dead_letter(
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
            payload: inner.config.dead_letter_payload(envelope.payload()),
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
            // Already on the path (or, for a conflict, this very payload already recorded):
            // the first record keeps its reason and error.
            DeadLettered::AlreadyDeadLettered => Ok(Outcome::AlreadyDeadLettered),
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
            payload: inner.config.dead_letter_payload(payload),
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
}
