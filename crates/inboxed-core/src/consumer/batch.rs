//! Settling a batch of deliveries: one processor transaction for the lot, then the acks.

use std::time::Duration;

use super::{keep_alive, requeue, settle};
use crate::delivery::{AckOrdering, Delivery};
use crate::error::Error;
use crate::handler::Handler;
use crate::processor::{Outcome, Processor};
use crate::store::Store;

/// Processes `deliveries` with [`Processor::process_batch_with_counts`] (a delivery without a
/// usable key is dead-lettered on its own), acks every one whose outcome committed, and
/// requeues the others. In-order deliveries (Kafka) are acked in arrival order, and one that
/// did not settle is retried in place before anything after it is acked, since acking a later
/// offset would commit past it.
///
/// # Errors
/// Only a failure to talk to the broker, after every delivery was tried.
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
    let mut results: Vec<Option<Result<Outcome, Error>>> =
        (0..deliveries.len()).map(|_| None).collect();
    let (mut envelopes, mut counts, mut at) = (Vec::new(), Vec::new(), Vec::new());
    for (i, delivery) in deliveries.iter().enumerate() {
        match delivery.envelope() {
            Ok(envelope) => {
                envelopes.push(envelope);
                // A first delivery is counted as such even where the broker keeps no count
                // (a RabbitMQ classic queue): its batch then skips the store's counting.
                let first = delivery.is_first_delivery().then_some(1);
                counts.push(first.or_else(|| delivery.delivery_count()));
                at.push(i);
            }
            Err(invalid) => {
                let dead = processor
                    .dead_letter_invalid(delivery.payload(), &invalid)
                    .await;
                results[i] = Some(dead);
            }
        }
    }
    if !envelopes.is_empty() {
        let work = processor.process_batch_with_counts(&envelopes, &counts);
        let processed = keep_alive(work, &deliveries, extend_every).await;
        for (i, result) in at.into_iter().zip(processed) {
            results[i] = Some(result);
        }
    }
    let in_order = deliveries
        .first()
        .is_some_and(|d| d.ack_ordering() == AckOrdering::InOrder);
    let mut first_error = None;
    let mut acks = Vec::new();
    for (delivery, result) in deliveries.into_iter().zip(results) {
        let result = result.unwrap_or_else(|| unreachable!("every delivery has a result"));
        let settled = match result {
            Ok(_) if in_order => delivery.ack().await.map_err(Error::Broker).map(drop),
            Ok(_) => {
                acks.push(delivery);
                Ok(())
            }
            // Retried in place until it settles (settle acks it), before any later offset.
            Err(_) if in_order => settle(processor, delivery, extend_every).await.map(drop),
            Err(error) => requeue(processor, delivery, error).await.map(drop),
        };
        if let Err(e) = settled {
            first_error.get_or_insert(e);
        }
    }
    if !acks.is_empty() {
        processor.failure_streak().succeeded();
        if let Err(e) = D::ack_all(acks).await {
            first_error.get_or_insert(Error::Broker(e));
        }
    }
    first_error.map_or(Ok(()), Err)
}
