//! The relay: a broker's deliveries stored into the store-then-process inbox, each acked only
//! after its row is committed. Workers (of any language, see docs/inbox-contract.md) process
//! the rows later.

use std::future::Future;
use std::time::Duration;

use tracing::{Instrument, warn};

use super::receipt::Inbox;
use super::store::{Enqueued, InboxStore};
use crate::backoff::{Backoff, FailureStreak};
use crate::delivery::{AckOrdering, Delivery, DeliverySource};
use crate::drive::drive;
use crate::error::{Error, delivery_name, error_chain};
use crate::metrics as m;
use crate::trace::spans;

/// Settings for [`InboxRelay`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InboxRelayConfig {
    /// Deliveries stored at once, or with `batch_size` above 1, batches stored at once.
    /// Defaults to 4.
    pub concurrency: usize,
    /// Deliveries stored together in one transaction ([`Inbox::store_many`]) and then acked
    /// together; 1 stores each on its own. A batch is what arrives within `batch_linger` of its
    /// first delivery, so keep the broker's prefetch at `concurrency × batch_size` or more.
    /// Defaults to 128 (64 took a third more CPU per delivery in the broker, the database and
    /// the relay alike: `inboxed-bench relay`).
    pub batch_size: usize,
    /// How long a batch waits for more deliveries after its first. Defaults to 2 ms.
    pub batch_linger: Duration,
    /// Delay before a delivery that could not be stored (the database is down, say) comes back,
    /// by its delivery count. Defaults to 100 ms doubling to 30 s, with jitter.
    pub retry_backoff: Backoff,
}

impl Default for InboxRelayConfig {
    fn default() -> Self {
        Self {
            concurrency: 4,
            batch_size: 128,
            batch_linger: Duration::from_millis(2),
            retry_backoff: Backoff {
                base: Duration::from_millis(100),
                max: Duration::from_secs(30),
            },
        }
    }
}

impl InboxRelayConfig {
    /// Sets [`InboxRelayConfig::concurrency`] (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Sets [`InboxRelayConfig::batch_size`] (at least 1).
    #[must_use]
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// Sets [`InboxRelayConfig::batch_linger`].
    #[must_use]
    pub fn batch_linger(mut self, batch_linger: Duration) -> Self {
        self.batch_linger = batch_linger;
        self
    }

    /// Sets [`InboxRelayConfig::retry_backoff`].
    #[must_use]
    pub fn retry_backoff(mut self, retry_backoff: Backoff) -> Self {
        self.retry_backoff = retry_backoff;
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
            Ok(envelope) => {
                let one = std::iter::once(envelope);
                let span = spans::receive(delivery.system(), inbox.consumer(), one, 1);
                inbox.store(envelope).instrument(span).await
            }
            .map(|e| match e {
                Enqueued::Stored { id } => Relayed::Stored { id },
                Enqueued::Duplicate => {
                    warn_if_redrive(inbox, envelope);
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
                delivery
                    .ack()
                    .await
                    .map_err(Error::ack_failed("ack", name))?;
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
                    .map_err(Error::ack_failed("requeue", name))?;
                return Ok(Relayed::Requeued { error, delay });
            }
        }
    }
}

/// Stores a batch of deliveries in one transaction ([`Inbox::store_many`]) and acks every one
/// after the commit; a delivery without a usable key is dead-lettered on its own first. When
/// the batch cannot be stored (the database is down, say), each delivery goes through
/// [`relay_one`] in arrival order, which requeues it with the outage's delay, or for in-order
/// deliveries retries it in place before anything after it is acked.
///
/// # Errors
/// Only a failure to talk to the broker (the first; each is logged).
pub async fn relay_batch<S: InboxStore, D: Delivery>(
    inbox: &Inbox<S>,
    deliveries: Vec<D>,
    backoff: &Backoff,
    streak: &FailureStreak,
) -> Result<Vec<Relayed>, Error> {
    let in_order = deliveries
        .first()
        .is_some_and(|d| d.ack_ordering() == AckOrdering::InOrder);
    let envelopes: Vec<_> = deliveries.iter().map(Delivery::envelope).collect();
    // In-order batches with a keyless delivery keep to the one-by-one path: its dead letter
    // must not be acked past a later delivery that fails.
    let valid: Vec<_> = envelopes
        .iter()
        .filter_map(|e| e.as_ref().ok().cloned())
        .collect();
    if in_order && valid.len() < deliveries.len() {
        return one_by_one(inbox, deliveries, backoff, streak).await;
    }
    let system = deliveries.first().and_then(Delivery::system);
    let span = spans::receive(system, inbox.consumer(), valid.iter(), valid.len());
    let stored = match inbox.store_many(&valid).instrument(span).await {
        Ok(stored) => stored,
        Err(error) => {
            warn!(
                error = error_chain(&error),
                deliveries = deliveries.len(),
                "batch of deliveries not stored; storing them one by one"
            );
            return one_by_one(inbox, deliveries, backoff, streak).await;
        }
    };
    streak.succeeded();
    let mut stored = stored.into_iter().zip(&valid);
    let (mut relayed, mut acks, mut names, mut errors) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (delivery, envelope) in deliveries.into_iter().zip(&envelopes) {
        let name = delivery_name(envelope);
        match envelope {
            Ok(_) => {
                let Some((enqueued, envelope)) = stored.next() else {
                    unreachable!("one outcome per valid delivery");
                };
                relayed.push(match enqueued {
                    Enqueued::Stored { id } => Relayed::Stored { id },
                    Enqueued::Duplicate => {
                        warn_if_redrive(inbox, envelope);
                        Relayed::Duplicate
                    }
                    Enqueued::Conflict { .. } => Relayed::Conflict,
                });
                acks.push(delivery);
                names.push(name);
            }
            Err(invalid) => match inbox.dead_letter_invalid(delivery.payload(), invalid).await {
                Ok(()) => {
                    relayed.push(Relayed::Invalid);
                    acks.push(delivery);
                    names.push(name);
                }
                Err(_) => {
                    let again = relay_one(inbox, delivery, backoff, streak).await;
                    match again {
                        Ok(r) => relayed.push(r),
                        Err(e) => errors.push(e),
                    }
                }
            },
        }
    }
    if in_order {
        for (delivery, name) in acks.into_iter().zip(names) {
            if let Err(e) = delivery.ack().await {
                errors.push(Error::ack_failed("ack", name)(e));
            }
        }
    } else if !acks.is_empty()
        && let Err(e) = D::ack_all(acks).await
    {
        let batch = format!(
            "the {} stored deliveries of a batch ({})",
            names.len(),
            names.join(", ")
        );
        errors.push(Error::ack_failed("ack", batch)(e));
    }
    for e in &errors {
        warn!(
            error = error_chain(e),
            "could not settle a relayed delivery with the broker"
        );
    }
    errors.into_iter().next().map_or(Ok(relayed), Err)
}

/// Each delivery through [`relay_one`], in arrival order.
async fn one_by_one<S: InboxStore, D: Delivery>(
    inbox: &Inbox<S>,
    deliveries: Vec<D>,
    backoff: &Backoff,
    streak: &FailureStreak,
) -> Result<Vec<Relayed>, Error> {
    let mut relayed = Vec::with_capacity(deliveries.len());
    for delivery in deliveries {
        relayed.push(relay_one(inbox, delivery, backoff, streak).await?);
    }
    Ok(relayed)
}

fn warn_if_redrive<S: InboxStore>(inbox: &Inbox<S>, envelope: &crate::envelope::Envelope) {
    if envelope.redrive_for() == Some(inbox.consumer().as_str()) {
        // A dead row is retried with `inboxed replay`, not through the broker.
        warn!(message_id = %envelope.id(), "a redrive reached a relay: the key is already a row (dead rows are retried with `inboxed replay`)");
    }
}

/// Moves a broker's deliveries into one consumer's inbox table: store, commit, ack.
#[derive(Debug)]
pub struct InboxRelay<S> {
    inbox: Inbox<S>,
    config: InboxRelayConfig,
    streak: FailureStreak,
}

impl<S: InboxStore> InboxRelay<S> {
    /// A relay into `inbox`.
    pub fn new(inbox: Inbox<S>, config: InboxRelayConfig) -> Self {
        Self {
            inbox,
            config,
            streak: FailureStreak::default(),
        }
    }

    /// Runs until the source closes or `shutdown` resolves, then finishes the deliveries in
    /// flight: none is acked before its row is committed. The source is read by a task of its
    /// own; with [`InboxRelayConfig::batch_size`] above 1 (the default) its deliveries are stored
    /// in batches ([`relay_batch`]), else one by one.
    ///
    /// # Errors
    /// The source failed to receive, or an in-order delivery could not be acked.
    pub async fn run<Src: DeliverySource + 'static>(
        &self,
        source: Src,
        shutdown: impl Future,
    ) -> Result<(), Error> {
        let batched = self.config.batch_size > 1;
        let limits = (self.config.batch_size, self.config.batch_linger);
        Box::pin(drive(
            source,
            shutdown,
            self.config.concurrency,
            limits,
            None,
            None,
            |deliveries| {
                let inbox = self.inbox.clone();
                let (backoff, streak) = (self.config.retry_backoff, self.streak.clone());
                async move {
                    if batched {
                        return relay_batch(&inbox, deliveries, &backoff, &streak)
                            .await
                            .map(drop);
                    }
                    for delivery in deliveries {
                        relay_one(&inbox, delivery, &backoff, &streak).await?;
                    }
                    Ok(())
                }
            },
        ))
        .await
    }
}
