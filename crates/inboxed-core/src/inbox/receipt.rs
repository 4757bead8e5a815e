//! Receipt and operator actions: store a received message, replay or re-drive rows, purge
//! done rows by age.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use tokio::sync::{mpsc, watch};

use tracing::warn;

use super::store::{
    EnqueueManyParams, EnqueueParams, Enqueued, InboxStore, ReplayParams, Replayed, Selector,
};
use crate::envelope::{ConsumerName, Envelope};
use crate::error::{Error, StoreError, error_chain};
use crate::hash::PayloadHash;
use crate::metrics as m;
use crate::store::{DeadLetterParams, DeadLetterReason};

/// The receiving side of the store-then-process inbox for one consumer.
#[derive(Debug, Clone)]
pub struct Inbox<S> {
    store: S,
    consumer: ConsumerName,
    notify: bool,
    redact: bool,
    wakeups: Arc<Wakeups>,
}

/// The sending end of this inbox's notifier task, started with the first new row. The task
/// sends one `NOTIFY` at a time; a wake-up asked for while one is in flight waits in the
/// channel's single slot, and any more fold into it. The task ends when the last clone of the
/// inbox drops the sender. `asked` counts the wake-ups asked for, `sent` how many of them the
/// task has dealt with (sent, or failed and logged), for [`Inbox::flush`].
#[derive(Debug)]
struct Wakeups {
    tx: OnceLock<mpsc::Sender<()>>,
    asked: AtomicU64,
    sent: watch::Sender<u64>,
}

impl Default for Wakeups {
    fn default() -> Self {
        Self {
            tx: OnceLock::new(),
            asked: AtomicU64::new(0),
            sent: watch::channel(0).0,
        }
    }
}

impl<S: InboxStore> Inbox<S> {
    /// The inbox of `consumer` in `store`.
    pub fn new(store: S, consumer: ConsumerName) -> Self {
        Self {
            store,
            consumer,
            notify: true,
            redact: false,
            wakeups: Arc::default(),
        }
    }

    /// The consumer whose rows this inbox stores.
    #[must_use]
    pub fn consumer(&self) -> &ConsumerName {
        &self.consumer
    }

    /// Whether a new row wakes idle workers at once: those of this process directly (when
    /// they run on a clone of this inbox's store), those of other processes with PostgreSQL
    /// `NOTIFY`, sent after the receipt commits by a notifier task that folds concurrent
    /// wake-ups together. On by default: at a trickle it takes pickup from a poll interval to a
    /// few milliseconds.
    #[must_use]
    pub fn notify(mut self, on: bool) -> Self {
        self.notify = on;
        self
    }

    /// Whether the dead letter written for a conflicting receipt (same key, another payload)
    /// leaves out the payload, keeping its hash, as `ProcessorConfig::redact_dead_letter_payloads`
    /// does for the processor. Off by default.
    #[must_use]
    pub fn redact_dead_letter_payloads(mut self, redact: bool) -> Self {
        self.redact = redact;
        self
    }

    /// Stores a received message as a pending row (committed when this returns), unless the
    /// key is already there. Ack the delivery after `Ok`, whatever the variant: a duplicate is
    /// already stored, and a conflict (same key, different payload) is logged at WARN and
    /// written to the dead-letter table, never silently dropped.
    ///
    /// # Errors
    /// A store failure: nothing was stored, so requeue the delivery.
    pub async fn store(&self, envelope: &Envelope) -> Result<Enqueued, Error> {
        let params = EnqueueParams {
            consumer: &self.consumer,
            envelope,
        };
        let enqueued = contention_retried(|| self.store.enqueue(&params)).await?;
        if self.notify && matches!(enqueued, Enqueued::Stored { .. }) {
            self.wake_workers();
        }
        self.count(outcome(enqueued), 1);
        self.settle(envelope, enqueued).await?;
        Ok(enqueued)
    }

    /// Stores many received messages in one transaction and one commit, each with its own
    /// outcome, in the order given, as [`Inbox::store`] would give it: a key stored before, or
    /// earlier in the same batch, is a duplicate, or a conflict when its payload differs (logged
    /// at WARN and dead-lettered). Ack every delivery after `Ok`. Idle workers are woken once
    /// for the batch.
    ///
    /// The batch's cost is close to one message's, so a receiver that takes deliveries in
    /// batches (the relay, a Kafka poll, an SQS receive of ten) stores them many times faster
    /// than one `store` each; measured in docs/bench/runs.md ("Receipt").
    ///
    /// # Errors
    /// A store failure: nothing of the batch was stored, so requeue every delivery.
    pub async fn store_many(&self, envelopes: &[Envelope]) -> Result<Vec<Enqueued>, Error> {
        if envelopes.is_empty() {
            return Ok(Vec::new());
        }
        let params = EnqueueManyParams {
            consumer: &self.consumer,
            envelopes,
        };
        let outcomes = contention_retried(|| self.store.enqueue_many(&params)).await?;
        if self.notify
            && outcomes
                .iter()
                .any(|o| matches!(o, Enqueued::Stored { .. }))
        {
            self.wake_workers();
        }
        // The receipt counter once an outcome, not once a message: a batch of 1,000 would
        // otherwise look its labels up 1,000 times.
        for kind in ["stored", "duplicate", "conflict"] {
            let n = outcomes.iter().filter(|&&o| outcome(o) == kind).count();
            self.count(kind, n as u64);
        }
        for (envelope, &enqueued) in envelopes.iter().zip(&outcomes) {
            self.settle(envelope, enqueued).await?;
        }
        Ok(outcomes)
    }

    /// What follows a committed receipt: the dead letter of a conflict.
    async fn settle(&self, envelope: &Envelope, enqueued: Enqueued) -> Result<(), Error> {
        if let Enqueued::Conflict { stored, received } = enqueued {
            warn!(message_id = %envelope.id(), %stored, %received, "message id already stored with a different payload");
            let error = format!("already stored with payload {stored}, received {received}");
            let letter = DeadLetterParams {
                consumer: &self.consumer,
                message_id: Some(envelope.id()),
                message_type: envelope.message_type(),
                correlation_id: envelope.correlation_id(),
                payload: if self.redact { &[] } else { envelope.payload() },
                payload_hash: Some(received),
                reason: DeadLetterReason::Conflict,
                error: &error,
                attempts: 1,
            };
            self.store.dead_letter(&letter).await?;
        }
        Ok(())
    }

    /// `n` receipts of one outcome, counted.
    fn count(&self, outcome: &'static str, n: u64) {
        if n > 0 {
            metrics::counter!(m::RECEIPTS_TOTAL, "consumer" => self.consumer.as_str().to_owned(), "outcome" => outcome)
                .increment(n);
        }
    }

    /// Dead-letters a delivery that has no usable key (reason `invalid_message`, with its raw
    /// payload unless redacted), so that it is neither stored without dedup nor dropped. Ack
    /// the delivery after `Ok`.
    ///
    /// # Errors
    /// A store failure: nothing was written, so requeue the delivery.
    pub async fn dead_letter_invalid(
        &self,
        payload: &[u8],
        error: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> Result<(), Error> {
        let chain = error_chain(error);
        let letter = DeadLetterParams {
            consumer: &self.consumer,
            message_id: None,
            message_type: None,
            correlation_id: None,
            payload: if self.redact { &[] } else { payload },
            payload_hash: Some(PayloadHash::of(payload)),
            reason: DeadLetterReason::InvalidMessage,
            error: &chain,
            attempts: 1,
        };
        self.store.dead_letter(&letter).await?;
        warn!(
            error = chain,
            "delivery without a usable message id dead-lettered"
        );
        self.count("invalid", 1);
        Ok(())
    }

    /// Wakes idle workers after the row committed: this process's own at once, other
    /// processes' through the notifier task. Never waits.
    fn wake_workers(&self) {
        if let Some(local) = self.store.local_wakers() {
            local.wake(&self.consumer);
        }
        let tx = self.wakeups.tx.get_or_init(|| {
            let (tx, mut rx) = mpsc::channel::<()>(1);
            let (store, consumer) = (self.store.clone(), self.consumer.clone());
            let wakeups = Arc::clone(&self.wakeups);
            tokio::spawn(async move {
                while rx.recv().await.is_some() {
                    // Every wake-up asked for before this NOTIFY is covered by it.
                    let covered = wakeups.asked.load(Ordering::Acquire);
                    if let Err(e) = store.notify(&consumer).await {
                        warn!(error = %e, "could not wake idle workers; they will poll");
                    }
                    wakeups.sent.send_replace(covered);
                }
            });
            tx
        });
        self.wakeups.asked.fetch_add(1, Ordering::AcqRel);
        // Full: a wake-up is already pending, which covers this row too.
        let _ = tx.try_send(());
    }

    /// Waits until the wake-ups of the rows stored so far have been sent (or have failed and
    /// been logged). Call it before closing the pool in a producer that stores and exits: the
    /// notifier sends after the receipt returns, and a pool closed under it logs a failed
    /// wake-up. Returns at once when nothing is pending.
    pub async fn flush(&self) {
        let asked = self.wakeups.asked.load(Ordering::Acquire);
        let mut sent = self.wakeups.sent.subscribe();
        let _ = sent.wait_for(|&sent| sent >= asked).await;
    }

    /// Resets the selected dead rows to pending, as new; with `include_done`, done rows too,
    /// which applies their effect again (a re-drive). Either way an audit record (who, when,
    /// why, which rows) is written in the same transaction.
    ///
    /// # Errors
    /// A store failure; nothing was reset.
    pub async fn replay(
        &self,
        selector: &Selector,
        include_done: bool,
        actor: &str,
        reason: &str,
    ) -> Result<Replayed, Error> {
        let params = ReplayParams {
            consumer: &self.consumer,
            selector,
            include_done,
            actor,
            reason,
            apply: true,
        };
        Ok(self.store.replay(&params).await?)
    }

    /// The rows [`Inbox::replay`] would reset with these arguments, and how many of them are
    /// done, for a confirmation that states what it will touch; nothing changes and nothing
    /// is audited.
    ///
    /// # Errors
    /// A store failure.
    pub async fn replay_preview(
        &self,
        selector: &Selector,
        include_done: bool,
    ) -> Result<Replayed, Error> {
        let params = ReplayParams {
            consumer: &self.consumer,
            selector,
            include_done,
            actor: "",
            reason: "",
            apply: false,
        };
        Ok(self.store.replay(&params).await?)
    }

    /// Deletes done rows finished before `older_than`, in batches of `batch` rows, each its
    /// own transaction, until a batch comes back short. Returns how many were deleted.
    ///
    /// Done rows are this variant's dedup memory: `older_than` must lie further back than the
    /// longest redelivery, dead-letter replay or offset reset you support.
    ///
    /// # Errors
    /// A store failure; the batches before it stay deleted.
    pub async fn purge_done(&self, older_than: SystemTime, batch: u32) -> Result<u64, Error> {
        let batch = batch.max(1);
        let mut total = 0;
        loop {
            let n = self.store.purge_done(older_than, batch).await?;
            total += n;
            if n < u64::from(batch) {
                return Ok(total);
            }
        }
    }
}

/// Retries a receipt that lost to contention (a deadlock or serialization failure rolls the
/// whole receipt back, so running it again is safe), a few times with jittered, growing
/// pauses. Two batch receipts sharing keys in different orders deadlock on an engine that
/// inserts them one by one under row locks (MySQL: InnoDB reports 1213 and rolls one back);
/// the caller would otherwise requeue the whole batch for a conflict that is nobody's fault.
async fn contention_retried<T, F, Fut>(op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    const PAUSES: crate::Backoff = crate::Backoff {
        base: std::time::Duration::from_millis(10),
        max: std::time::Duration::from_millis(160),
    };
    PAUSES.retrying(5, StoreError::is_contention, op).await
}

/// A receipt's outcome as the receipt counter's label names it.
fn outcome(enqueued: Enqueued) -> &'static str {
    match enqueued {
        Enqueued::Stored { .. } => "stored",
        Enqueued::Duplicate => "duplicate",
        Enqueued::Conflict { .. } => "conflict",
    }
}
