//! What an operator does with a dead letter: retry it (after a fix) or discard it.

use super::{Failure, Outcome, Processor};
use crate::driver::Transaction as _;
use crate::envelope::{Envelope, MessageId};
use crate::error::Error;
use crate::handler::Handler;
use crate::store::{Claim, KeyParams, Store};

impl<S: Store, H: Handler<S::Db>> Processor<S, H> {
    /// Processes a dead-lettered message again from its stored payload, typically after the
    /// handler or a dependency was fixed.
    ///
    /// The dead letter is deleted in the same transaction as the claim and the handler, so it
    /// disappears only if the retry commits. Returns `Ok(None)` when the key has no dead letter,
    /// `Ok(Some(Outcome::Processed))` when the retry applied the effect, and
    /// `Ok(Some(Outcome::Duplicate))` when the key had been processed meanwhile (the stale dead
    /// letter is then removed).
    ///
    /// # Errors
    /// A handler or store failure. The dead letter then stays exactly as it was.
    pub async fn retry_dead_letter(
        &self,
        message_id: &MessageId,
    ) -> Result<Option<Outcome>, Error> {
        self.ensure_ready().await?;
        let inner = &*self.inner;
        let key = KeyParams {
            consumer: &inner.consumer,
            message_id,
        };
        let Some(letter) = inner.store.load_dead_letter(&key).await? else {
            return Ok(None);
        };
        if letter
            .payload_hash
            .is_some_and(|h| h != crate::hash::PayloadHash::of(&letter.payload))
        {
            return Err(Error::PayloadRedacted {
                message_id: message_id.clone(),
            });
        }
        let mut envelope = Envelope::new(message_id.clone(), letter.payload);
        if let Some(t) = letter.message_type {
            envelope = envelope.with_type(t);
        }
        if let Some(c) = letter.correlation_id {
            envelope = envelope.with_correlation_id(c);
        }
        match self.transaction(&envelope, true).await {
            Ok(Claim::New) => Ok(Some(Outcome::Processed)),
            Ok(Claim::DeadLettered) => Ok(Some(Outcome::AlreadyDeadLettered)),
            Ok(_) => Ok(Some(Outcome::Duplicate)),
            Err(Failure::Store(e) | Failure::KeyBusy(e)) => Err(e.into()),
            Err(Failure::Handler(source)) => Err(Error::Handler {
                consumer: inner.consumer.clone(),
                attempt: letter.attempts.saturating_add(1),
                source,
            }),
        }
    }

    /// Deletes a key's dead letter without processing it. The next delivery of the key, if
    /// one ever comes, is then processed as new. Conflict records are kept. Returns whether
    /// there was a dead letter.
    ///
    /// # Errors
    /// A store failure.
    pub async fn discard_dead_letter(&self, message_id: &MessageId) -> Result<bool, Error> {
        let inner = &*self.inner;
        let key = KeyParams {
            consumer: &inner.consumer,
            message_id,
        };
        let mut tx = inner.store.begin(&inner.config.begin_params()).await?;
        let deleted = inner.store.delete_dead_letter(&mut *tx, &key).await?;
        tx.commit().await?;
        Ok(deleted)
    }
}
