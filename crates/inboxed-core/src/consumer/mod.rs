//! The consumer loop: receive, process, and ack only after the commit is durable.

mod batch;
mod tenants;

pub use tenants::Tenants;

use std::future::Future;
use std::time::Duration;

use tracing::warn;

use crate::delivery::{AckOrdering, Delivery, DeliverySource};
use crate::drive::drive;
use crate::error::{Error, HandlerError, delivery_name, error_chain};
use crate::handler::Handler;
use crate::metrics as m;
use crate::processor::{Outcome, Processor};
use crate::rate_limit::RateLimit;
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
    /// Handed back before it ran, with this delay: its bucket was over its rate limit
    /// ([`RateLimit::per_bucket`]). It used up no attempt.
    Deferred {
        /// The delay asked of the broker: until its slot among its bucket's permits.
        delay: Duration,
    },
}

/// Settings for [`Consumer`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// Deliveries processed at once. Defaults to 8.
    pub concurrency: usize,
    /// While a handler runs, extend the broker's deadline this often (by twice this). `None`
    /// never extends; a period under 100 ms is taken as 100 ms. Defaults to `None`.
    pub extend_every: Option<Duration>,
    /// Deliveries settled together, in one transaction and one commit
    /// ([`Processor::process_batch_with_counts`]); `concurrency` then counts batches, so the
    /// broker's prefetch should be at least `concurrency × batch_size` for batches to fill.
    /// Defaults to 1: each delivery in a transaction of its own.
    pub batch_size: usize,
    /// After the first delivery of a batch, how long to wait for more before settling what is
    /// there: the most a batch adds to a message's latency when traffic is light. Defaults to
    /// 2 ms.
    pub batch_linger: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            concurrency: 8,
            extend_every: None,
            batch_size: 1,
            batch_linger: Duration::from_millis(2),
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

    /// Sets [`ConsumerConfig::batch_size`] (at least 1).
    #[must_use]
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// Sets [`ConsumerConfig::extend_every`].
    #[must_use]
    pub fn extend_every(mut self, extend_every: Option<Duration>) -> Self {
        self.extend_every = extend_every;
        self
    }

    /// Sets [`ConsumerConfig::batch_linger`].
    #[must_use]
    pub fn batch_linger(mut self, batch_linger: Duration) -> Self {
        self.batch_linger = batch_linger;
        self
    }
}

/// How often an in-order delivery waiting in place for its next attempt runs as a probe
/// ([`Processor::probe`], charged nothing): the ladder's later steps are minutes, and the
/// partition behind the delivery waits with it, so a dependency that is back is noticed within
/// this rather than at the next step.
const PROBE_IN_PLACE: Duration = Duration::from_secs(60);

/// Processes one delivery and settles it: ack after commit or dead letter, requeue otherwise.
/// An [`AckOrdering::InOrder`] delivery is never requeued: it is retried in place, with the
/// ladder's delays between its attempts and a probe every minute meanwhile, until it settles
/// (its source keeps its session alive: [`DeliverySource::idle`]).
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
    settle_as(processor, delivery, extend_every, true).await
}

/// [`settle`]; `limited`: the delivery has yet to take its bucket's permit (a delivery of a
/// batch that took it already must not take a second).
pub(super) async fn settle_as<S, H, D>(
    processor: &Processor<S, H>,
    delivery: D,
    extend_every: Option<Duration>,
    limited: bool,
) -> Result<Settled, Error>
where
    S: Store,
    H: Handler<S::Db>,
    D: Delivery,
{
    let in_order = delivery.ack_ordering() == AckOrdering::InOrder;
    let envelope = delivery.envelope();
    let name = delivery_name(&envelope);
    if limited
        && let Ok(envelope) = &envelope
        && let Some(delay) = over_bucket_limit(processor, envelope, in_order).await
    {
        return defer(processor, delivery, delay, name).await;
    }
    let mut tries = 0;
    let result = loop {
        let result = match &envelope {
            Ok(envelope) => {
                let work =
                    processor.process_from(envelope, delivery.delivery_count(), delivery.system());
                keep_alive(work, std::slice::from_ref(&delivery), extend_every).await
            }
            Err(invalid) => {
                processor
                    .dead_letter_invalid(delivery.payload(), invalid)
                    .await
            }
        };
        // An in-order broker cannot take one message back while acking the next (acking a
        // later offset commits past it), so the delivery is retried in place until it settles.
        // Attempts keep counting, so a poison message still reaches the dead-letter path.
        match result {
            Err(error) if in_order => {
                tries += 1;
                let wait = retry_delay(processor, &error);
                warn!(
                    error = error_chain(&error),
                    tries,
                    ?wait,
                    "in-order delivery not settled; retrying in place"
                );
                let Ok(envelope) = &envelope else {
                    tokio::time::sleep(wait).await;
                    continue;
                };
                let count = delivery.delivery_count();
                let system = delivery.system();
                if let Some(probed) = probe_in_place(processor, envelope, count, system, wait).await
                {
                    break Ok(probed);
                }
            }
            other => break other,
        }
    };
    match result {
        Ok(outcome) => {
            processor.failure_streak().succeeded();
            delivery
                .ack()
                .await
                .map_err(Error::ack_failed("ack", name))?;
            Ok(Settled::Acked(outcome))
        }
        Err(error) => requeue(processor, delivery, error, name).await,
    }
}

/// Waits `wait` for an in-order delivery's next attempt, probing every [`PROBE_IN_PLACE`]
/// meanwhile; the outcome of the probe that settled it, or `None` when the wait is over.
async fn probe_in_place<S, H>(
    processor: &Processor<S, H>,
    envelope: &crate::Envelope,
    delivery_count: Option<u32>,
    system: Option<&'static str>,
    wait: Duration,
) -> Option<Outcome>
where
    S: Store,
    H: Handler<S::Db>,
{
    let attempt_at = tokio::time::Instant::now() + wait;
    loop {
        let left = attempt_at.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        tokio::time::sleep(left.min(PROBE_IN_PLACE)).await;
        if tokio::time::Instant::now() >= attempt_at {
            return None;
        }
        if let Ok(outcome) = processor.probe(envelope, delivery_count, system).await {
            return Some(outcome);
        }
    }
}

/// Takes a permit of `envelope`'s bucket ([`RateLimit::per_bucket`]), or returns how long to
/// defer the delivery. An in-order delivery cannot be handed back without holding up its
/// partition, so it waits in place for the permit instead and gets `None`.
async fn over_bucket_limit<S, H>(
    processor: &Processor<S, H>,
    envelope: &crate::Envelope,
    in_order: bool,
) -> Option<Duration>
where
    S: Store,
    H: Handler<S::Db>,
{
    let limit = &processor.config().rate_limit;
    loop {
        match limit.check_bucket(envelope, !in_order) {
            Ok(()) => return None,
            Err(wait) if in_order => {
                metrics::counter!(m::RATE_LIMITED_TOTAL, "consumer" => processor.consumer().as_str().to_owned(), "action" => "waited")
                    .increment(1);
                tokio::time::sleep(wait).await;
            }
            Err(wait) => return Some(wait),
        }
    }
}

/// Hands back a delivery over its bucket's rate limit, before it ran, for `delay`.
async fn defer<S, H, D>(
    processor: &Processor<S, H>,
    delivery: D,
    delay: Duration,
    name: String,
) -> Result<Settled, Error>
where
    S: Store,
    H: Handler<S::Db>,
    D: Delivery,
{
    metrics::counter!(m::RATE_LIMITED_TOTAL, "consumer" => processor.consumer().as_str().to_owned(), "action" => "deferred")
        .increment(1);
    delivery
        .requeue(Some(delay))
        .await
        .map_err(Error::ack_failed("requeue", name))?;
    Ok(Settled::Deferred { delay })
}

/// Returns a delivery whose processing failed (nothing committed) to the broker, after
/// [`retry_delay`].
async fn requeue<S, H, D>(
    processor: &Processor<S, H>,
    delivery: D,
    error: Error,
    name: String,
) -> Result<Settled, Error>
where
    S: Store,
    H: Handler<S::Db>,
    D: Delivery,
{
    let delay = Some(retry_delay(processor, &error));
    delivery
        .requeue(delay)
        .await
        .map_err(Error::ack_failed("requeue", name))?;
    Ok(Settled::Requeued { error, delay })
}

/// How long a delivery that failed waits before it runs again: what the handler asked for
/// ([`HandlerError::RetryAfter`]), the ladder's delay for the attempt that failed, or, when the
/// store failed (nobody's attempt), about as long as the outage has lasted, so that retries
/// thin out however many deliveries fail meanwhile and whatever count the broker keeps.
fn retry_delay<S, H>(processor: &Processor<S, H>, error: &Error) -> Duration
where
    S: Store,
    H: Handler<S::Db>,
{
    let ladder = &processor.config().ladder;
    match error {
        Error::Handler {
            source: HandlerError::RetryAfter { after, .. },
            ..
        } => *after,
        Error::Handler { attempt, .. } => ladder.delay(*attempt),
        _ => ladder.after_outage(processor.failure_streak().failed()),
    }
}

/// Runs `work`, extending every delivery's broker deadline each `every` meanwhile.
async fn keep_alive<T, D: Delivery>(
    work: impl Future<Output = T>,
    deliveries: &[D],
    every: Option<Duration>,
) -> T {
    let Some(every) = every else {
        return work.await;
    };
    // A zero period would make the ticker panic, and a tiny one would spend the broker's
    // round trips on nothing.
    let every = every.max(Duration::from_millis(100));
    tokio::pin!(work);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = ticker.tick() => {
                // All at once: one round trip for the batch, not one per delivery.
                let extends = deliveries.iter().map(|d| d.extend_deadline(every * 2));
                for extended in futures_util::future::join_all(extends).await {
                    if let Err(e) = extended {
                        warn!(error = %e, "could not extend a delivery's deadline");
                    }
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

    /// Runs until the source closes or `shutdown` resolves, then drains in-flight work. The
    /// source is read by a task of its own; with a [`ConsumerConfig::batch_size`] above 1 its
    /// deliveries are settled in batches, else one by one. At shutdown the deliveries already
    /// received are settled before this returns. While its kill switch is open, the switch is
    /// recorded in the store for `inboxed stats` and the console.
    ///
    /// # Errors
    /// The source failed to receive, or an in-order delivery could not be acked.
    pub async fn run<Src: DeliverySource + 'static>(
        &self,
        source: Src,
        shutdown: impl Future,
    ) -> Result<(), Error> {
        let config = &self.config;
        let extend = config.extend_every;
        let batched = config.batch_size > 1;
        let limits = (config.batch_size, config.batch_linger);
        let switch = self.processor.config().kill_switch.clone();
        let limit = Some(self.processor.config().rate_limit.clone()).filter(RateLimit::is_limited);
        // On the heap: the loop's state holds an in-order batch's whole settling, and a caller
        // that awaits `run` on a thread's stack (a `#[tokio::test]`, a `block_on`) would carry
        // it there (a test consumer overflowed a 2 MiB test thread that way).
        let running = Box::pin(drive(
            source,
            shutdown,
            config.concurrency,
            limits,
            Some(switch.clone()),
            limit,
            |deliveries| {
                let processor = self.processor.clone();
                async move {
                    if batched {
                        return batch::settle_batch(&processor, deliveries, extend).await;
                    }
                    for delivery in deliveries {
                        settle(&processor, delivery, extend).await?;
                    }
                    Ok(())
                }
            },
        ));
        let (store, consumer) = (self.processor.store(), self.processor.consumer());
        crate::kill_switch::reporting(&switch, store, consumer, running).await
    }
}
