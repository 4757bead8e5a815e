//! The consumer loop: receive, process, and ack only after the commit is durable.

use std::future::Future;
use std::time::Duration;

use tracing::warn;

use crate::delivery::{AckOrdering, Delivery, DeliverySource};
use crate::drive::drive;
use crate::error::Error;
use crate::handler::Handler;
use crate::processor::{Outcome, Processor};
use crate::store::Store;

/// How a delivery was settled with the broker.
#[derive(Debug)]
#[non_exhaustive]
pub enum Settled {
    /// Acked after this outcome was committed.
    Acked(Outcome),
    /// Requeued (with the delay asked for) because nothing was committed.
    Requeued {
        /// Why processing did not settle the message.
        error: Error,
        /// The delay asked of the broker.
        delay: Option<Duration>,
    },
}

/// Settings for [`Consumer`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// Deliveries processed at once. Defaults to 8.
    pub concurrency: usize,
    /// While a handler runs, extend the broker's deadline this often (by twice this). `None`
    /// never extends. Defaults to `None`.
    pub extend_every: Option<Duration>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            concurrency: 8,
            extend_every: None,
        }
    }
}

impl ConsumerConfig {
    /// Sets [`ConsumerConfig::concurrency`] (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
}

/// Processes one delivery and settles it: ack after commit or dead letter, requeue otherwise.
/// An [`AckOrdering::InOrder`] delivery is never requeued: it is retried in place, with
/// `requeue_backoff` between tries, until it settles.
///
/// # Errors
/// Only a failure to talk to the broker; processing failures become a requeue.
pub async fn settle<S, H, D>(
    processor: &Processor<S, H>,
    delivery: D,
    extend_every: Option<Duration>,
) -> Result<Settled, Error>
where
    S: Store,
    H: Handler<S::Db>,
    D: Delivery,
{
    let in_order = delivery.ack_ordering() == AckOrdering::InOrder;
    let mut tries = 0;
    let result = loop {
        let result = match delivery.envelope() {
            Ok(envelope) => {
                let work = processor.process(&envelope, delivery.delivery_count());
                keep_alive(work, &delivery, extend_every).await
            }
            Err(invalid) => {
                processor
                    .dead_letter_invalid(delivery.payload(), &invalid)
                    .await
            }
        };
        // An in-order broker cannot take one message back while acking the next (acking a
        // later offset commits past it), so the delivery is retried in place until it settles.
        // Attempts keep counting, so a poison message still reaches the dead-letter path.
        match result {
            Err(error) if in_order => {
                tries += 1;
                warn!(error = %error, tries, "in-order delivery not settled; retrying in place");
                tokio::time::sleep(processor.config().requeue_backoff.delay(tries)).await;
            }
            other => break other,
        }
    };
    match result {
        Ok(outcome) => {
            processor.failure_streak().succeeded();
            delivery.ack().await.map_err(Error::Broker)?;
            Ok(Settled::Acked(outcome))
        }
        Err(error) => {
            let backoff = &processor.config().requeue_backoff;
            let delay = Some(match &error {
                Error::Handler { attempt, .. } => backoff.delay(*attempt),
                // Not the message's fault (the database is down, say): also wait about as long
                // as the outage has lasted, whatever count the broker keeps.
                _ => {
                    let outage = processor.failure_streak().failed();
                    let by_count = backoff.delay(delivery.delivery_count().unwrap_or(1));
                    by_count.max(backoff.after_outage(outage))
                }
            });
            delivery.requeue(delay).await.map_err(Error::Broker)?;
            Ok(Settled::Requeued { error, delay })
        }
    }
}

async fn keep_alive<T, D: Delivery>(
    work: impl Future<Output = T>,
    delivery: &D,
    every: Option<Duration>,
) -> T {
    let Some(every) = every else {
        return work.await;
    };
    tokio::pin!(work);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = ticker.tick() => {
                if let Err(e) = delivery.extend_deadline(every * 2).await {
                    warn!(error = %e, "could not extend the delivery's deadline");
                }
            }
        }
    }
}

/// Pulls deliveries from a source and settles each through a [`Processor`], with bounded
/// concurrency, until the source ends or `shutdown` completes. In-flight deliveries are
/// finished before `run` returns; nothing is acked that was not committed.
#[derive(Debug)]
pub struct Consumer<S, H> {
    processor: Processor<S, H>,
    config: ConsumerConfig,
}

impl<S: Store, H: Handler<S::Db>> Consumer<S, H> {
    /// A consumer loop around `processor`.
    pub fn new(processor: Processor<S, H>, config: ConsumerConfig) -> Self {
        Self { processor, config }
    }

    /// Runs until the source closes or `shutdown` resolves, then drains in-flight work.
    ///
    /// # Errors
    /// The source failed to receive, or an in-order delivery could not be acked.
    pub async fn run<Src: DeliverySource>(
        &self,
        source: Src,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), Error> {
        let extend = self.config.extend_every;
        drive(source, shutdown, self.config.concurrency, |delivery| {
            let processor = self.processor.clone();
            async move { settle(&processor, delivery, extend).await }
        })
        .await
    }
}
