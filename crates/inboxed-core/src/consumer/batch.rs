//! Settling a batch of deliveries: one processor transaction for the lot, then the acks.

use std::time::Duration;

use tracing::warn;

use super::{keep_alive, requeue, settle, settle_as};
use crate::delivery::{AckOrdering, Delivery};
use crate::error::{Error, delivery_name, error_chain};
use crate::handler::Handler;
use crate::processor::{BatchRun, Outcome, Processor};
use crate::store::Store;

/// Processes `deliveries` as one batch ([`Processor::process_batch_with_counts`]; a delivery
/// without a usable key is dead-lettered on its own), acks every one whose outcome committed,
/// then requeues the others, concurrently. In-order deliveries (Kafka) are processed and acked
/// in arrival order: from the first that did not settle on, each is retried in place before
/// anything after it is acked, since acking a later offset would commit past it.
///
/// # Errors
/// A failure to talk to the broker (the first; each is logged), after every delivery was
/// tried.
pub(super) async fn settle_batch<S, H, D>(
    processor: &Processor<S, H>,
    deliveries: Vec<D>,
    extend_every: Option<Duration>,
) -> Result<(), Error>
where
    S: Store,
    H: Handler<S::Db>,
    D: Delivery,
{
    let in_order = deliveries
        .first()
        .is_some_and(|d| d.ack_ordering() == AckOrdering::InOrder);
    let mut errors = Vec::new();
    let (deliveries, tail, deferred) = within_bucket_limits(processor, deliveries, in_order);
    // The deferred are handed back while the rest are processed: a broker that holds a short
    // requeue (RabbitMQ, up to a second) must not hold up the batch.
    let deferring = deferred.into_iter().map(|(delivery, delay)| async move {
        let name = delivery_name(&delivery.envelope());
        super::defer(processor, delivery, delay, name).await
    });
    let (deferred, (results, names)) = tokio::join!(
        futures_util::future::join_all(deferring),
        process(processor, &deliveries, extend_every, in_order)
    );
    errors.extend(deferred.into_iter().filter_map(Result::err));
    if in_order {
        for ((delivery, result), name) in deliveries.into_iter().zip(results).zip(names) {
            let settled = match result {
                Some(Ok(_)) => delivery.ack().await.map_err(Error::ack_failed("ack", name)),
                // Retried in place until it settles (settle acks it), before any later offset;
                // its bucket's permit is taken already.
                _ => settle_as(processor, delivery, extend_every, false)
                    .await
                    .map(drop),
            };
            errors.extend(settled.err());
        }
        // From the first over its bucket's limit on, one by one: each waits for its permit.
        for delivery in tail {
            errors.extend(settle(processor, delivery, extend_every).await.err());
        }
    } else {
        let (mut acks, mut acked, mut failed) = (Vec::new(), Vec::new(), Vec::new());
        for ((delivery, result), name) in deliveries.into_iter().zip(results).zip(names) {
            match result {
                Some(Ok(_)) => {
                    acks.push(delivery);
                    acked.push(name);
                }
                Some(Err(error)) => failed.push((delivery, error, name)),
                None => unreachable!("an unordered batch settles every delivery"),
            }
        }
        // The committed first: a slow requeue (a broker that holds it) must not keep them
        // unacked past their visibility.
        if !acks.is_empty() {
            processor.failure_streak().succeeded();
            if let Err(e) = D::ack_all(acks).await {
                let batch = format!(
                    "the {} committed deliveries of a batch ({})",
                    acked.len(),
                    acked.join(", ")
                );
                errors.push(Error::ack_failed("ack", batch)(e));
            }
        }
        let requeues = failed
            .into_iter()
            .map(|(delivery, error, name)| requeue(processor, delivery, error, name));
        for requeued in futures_util::future::join_all(requeues).await {
            errors.extend(requeued.err());
        }
    }
    for e in &errors {
        warn!(
            error = error_chain(e),
            "could not settle a delivery of a batch with the broker"
        );
    }
    errors.into_iter().next().map_or(Ok(()), Err)
}

/// Takes each delivery's bucket permit ([`RateLimit::per_bucket`](crate::RateLimit::per_bucket))
/// and returns those that have one, and those to hand back with their delays. In order, the
/// first one over its limit and everything after it are returned apart instead (the tail), to
/// be settled one by one after the batch, each waiting in place for its permit.
#[allow(
    clippy::type_complexity,
    reason = "three lists, named where they are taken apart"
)]
fn within_bucket_limits<S, H, D>(
    processor: &Processor<S, H>,
    deliveries: Vec<D>,
    in_order: bool,
) -> (Vec<D>, Vec<D>, Vec<(D, Duration)>)
where
    S: Store,
    H: Handler<S::Db>,
    D: Delivery,
{
    let limit = &processor.config().rate_limit;
    if !limit.limits_buckets() {
        return (deliveries, Vec::new(), Vec::new());
    }
    let (mut within, mut tail, mut deferred) = (Vec::new(), Vec::new(), Vec::new());
    for delivery in deliveries {
        if !tail.is_empty() {
            tail.push(delivery);
            continue;
        }
        let over = match delivery.envelope() {
            Ok(envelope) => limit.check_bucket(&envelope, !in_order).err(),
            Err(_) => None,
        };
        match over {
            None => within.push(delivery),
            Some(_) if in_order => tail.push(delivery),
            Some(delay) => deferred.push((delivery, delay)),
        }
    }
    (within, tail, deferred)
}

/// The batch through the processor: one result per delivery, `None` for the in-order ones
/// left to be retried in place, and how each delivery is named if settling it fails.
async fn process<S, H, D>(
    processor: &Processor<S, H>,
    deliveries: &[D],
    extend_every: Option<Duration>,
    ordered: bool,
) -> (Vec<Option<Result<Outcome, Error>>>, Vec<String>)
where
    S: Store,
    H: Handler<S::Db>,
    D: Delivery,
{
    let mut results: Vec<Option<Result<Outcome, Error>>> =
        (0..deliveries.len()).map(|_| None).collect();
    let (mut envelopes, mut counts, mut at) = (Vec::new(), Vec::new(), Vec::new());
    let mut first_delivery = true;
    let mut names = Vec::with_capacity(deliveries.len());
    for (i, delivery) in deliveries.iter().enumerate() {
        let envelope = delivery.envelope();
        names.push(delivery_name(&envelope));
        match envelope {
            Ok(envelope) => {
                envelopes.push(envelope);
                counts.push(delivery.delivery_count());
                first_delivery &= delivery.is_first_delivery();
                at.push(i);
            }
            // In order, a keyless record waits for its turn with the rest (in place, below).
            Err(_) if ordered => {}
            Err(invalid) => {
                let dead = processor
                    .dead_letter_invalid(delivery.payload(), &invalid)
                    .await;
                results[i] = Some(dead);
            }
        }
    }
    if !envelopes.is_empty() {
        let run = BatchRun {
            counts: &counts,
            first_delivery,
            ordered,
            system: deliveries.first().and_then(Delivery::system),
        };
        let work = processor.run_batch(&envelopes, &run);
        let processed = keep_alive(work, deliveries, extend_every).await;
        for (i, result) in at.into_iter().zip(processed) {
            results[i] = result;
        }
    }
    if ordered {
        // Nothing after the first unsettled delivery counts as settled: it is retried in place
        // in order, even if the batch reached it.
        if let Some(stop) = results.iter().position(|r| !matches!(r, Some(Ok(_)))) {
            for r in &mut results[stop..] {
                *r = None;
            }
        }
    }
    (results, names)
}
