//! The relay: a broker's deliveries stored into the store-then-process inbox, each acked only
//! after its row is committed. Workers (of any language, see docs/inbox-contract.md) process
//! the rows later.

use std::future::Future;
use std::time::Duration;

use tracing::warn;

use super::receipt::Inbox;
use super::store::{Enqueued, InboxStore};
use crate::backoff::{Backoff, FailureStreak};
use crate::delivery::{AckOrdering, Delivery, DeliverySource};
use crate::drive::drive;
use crate::error::{Error, delivery_name, error_chain};
use crate::metrics as m;

/// Settings for [`Relay`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RelayConfig {
    /// Deliveries stored at once. Defaults to 32.
    pub concurrency: usize,
    /// Delay before a delivery that could not be stored (the database is down, say) comes back,
    /// by its delivery count. Defaults to 100 ms doubling to 30 s, with jitter.
    pub retry_backoff: Backoff,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            concurrency: 32,
            retry_backoff: Backoff {
                base: Duration::from_millis(100),
                max: Duration::from_secs(30),
            },
        }
    }
}

impl RelayConfig {
    /// Sets [`RelayConfig::concurrency`] (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
}

/// What the relay did with one delivery.
#[derive(Debug)]
#[non_exhaustive]
pub enum Relayed {
    /// Stored as a new pending row, then acked.
    Stored {
        /// The row id.
        id: i64,
    },
    /// Already stored with the same payload; acked.
    Duplicate,
    /// Already stored with another payload: dead-lettered (reason `conflict`), then acked.
    Conflict,
    /// No usable key: dead-lettered (reason `invalid_message`), then acked.
    Invalid,
    /// Nothing could be written; handed back to the broker with this delay.
    Requeued {
        /// Why it could not be stored.
        error: Error,
        /// The delay asked of the broker.
        delay: Duration,
    },
}

/// Stores one delivery and settles it: acked after the row (or its dead letter) is committed,
/// requeued otherwise, after a delay that grows with the outage `streak` records (shared by
/// the relay's tasks). An [`AckOrdering::InOrder`] delivery is retried in place until stored.
///
/// # Errors
/// Only a failure to talk to the broker.
pub async fn relay_one<S: InboxStore, D: Delivery>(
    inbox: &Inbox<S>,
    delivery: D,
    backoff: &Backoff,
    streak: &FailureStreak,
) -> Result<Relayed, Error> {
    let mut tries = 0;
    let envelope = delivery.envelope();
    let name = delivery_name(&envelope);
    loop {
        let stored = match &envelope {
            Ok(envelope) => inbox.store(envelope).await.map(|e| match e {
                Enqueued::Stored { id } => Relayed::Stored { id },
                Enqueued::Duplicate => {
                    if envelope.redrive_for() == Some(inbox.consumer().as_str()) {
                        // A dead row is retried with `inboxed replay`, not through the broker.
                        warn!(message_id = %envelope.id(), "a redrive reached a relay: the key is already a row (dead rows are retried with `inboxed replay`)");
                    }
                    Relayed::Duplicate
                }
                Enqueued::Conflict { .. } => Relayed::Conflict,
            }),
            Err(invalid) => inbox
                .dead_letter_invalid(delivery.payload(), invalid)
                .await
                .map(|()| Relayed::Invalid),
        };
        tries += 1;
        match stored {
            Ok(relayed) => {
                streak.succeeded();
                delivery.ack().await.map_err(Error::settle("ack", name))?;
                return Ok(relayed);
            }
            Err(error) if delivery.ack_ordering() == AckOrdering::InOrder => {
                warn!(
                    error = error_chain(&error),
                    tries, "in-order delivery not stored; retrying in place"
                );
                tokio::time::sleep(backoff.delay(tries)).await;
            }
            Err(error) => {
                // The database, not the message: wait about as long as the outage has lasted.
                let by_count = backoff.delay(delivery.delivery_count().unwrap_or(1));
                let delay = by_count.max(backoff.after_outage(streak.failed()));
                warn!(
                    error = error_chain(&error),
                    ?delay,
                    "delivery not stored; handed back to the broker"
                );
                metrics::counter!(m::RELAY_REQUEUES_TOTAL, "consumer" => inbox.consumer().as_str().to_owned())
                    .increment(1);
                delivery
                    .requeue(Some(delay))
                    .await
                    .map_err(Error::settle("requeue", name))?;
                return Ok(Relayed::Requeued { error, delay });
            }
        }
    }
}

/// Moves a broker's deliveries into one consumer's inbox table: store, commit, ack.
#[derive(Debug)]
pub struct Relay<S> {
    inbox: Inbox<S>,
    config: RelayConfig,
    streak: FailureStreak,
}

impl<S: InboxStore> Relay<S> {
    /// A relay into `inbox`.
    pub fn new(inbox: Inbox<S>, config: RelayConfig) -> Self {
        Self {
            inbox,
            config,
            streak: FailureStreak::default(),
        }
    }

    /// Runs until the source closes or `shutdown` resolves, then finishes the deliveries in
    /// flight: none is acked before its row is committed.
    ///
    /// # Errors
    /// The source failed to receive, or an in-order delivery could not be acked.
    pub async fn run<Src: DeliverySource>(
        &self,
        source: Src,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), Error> {
        drive(source, shutdown, self.config.concurrency, |delivery| {
            let inbox = self.inbox.clone();
            let (backoff, streak) = (self.config.retry_backoff, self.streak.clone());
            async move { relay_one(&inbox, delivery, &backoff, &streak).await }
        })
        .await
    }
}
