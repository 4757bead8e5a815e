//! A database per tenant: one source, one processor per tenant's database, and a header the
//! producer sets to say whose a message is. Each delivery is settled by its tenant's processor,
//! so its inbox row and its business change land in that tenant's database in one
//! transaction, as with a single database; nothing is shared between tenants but the loop.
//!
//! A delivery that names no tenant of this process (no header, one that is not text, or a
//! tenant with no database here) cannot be processed anywhere: it is dead-lettered in the
//! database of the processor given for it, with the header named in the reason, and acked.

use std::collections::{BTreeMap, HashMap};

use super::batch::settle_batch;
use super::{ConsumerConfig, settle};
use crate::delivery::{AckOrdering, Delivery, DeliverySource};
use crate::drive::drive;
use crate::envelope::escape_bytes;
use crate::error::Error;
use crate::handler::Handler;
use crate::processor::Processor;
use crate::store::Store;

/// A tenant's processor and its deliveries of one batch.
type Group<S, H, D> = (Processor<S, H>, Vec<D>);

/// Why a delivery could not be routed: the dead letter's error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unrouted(String);

/// Deliveries of one source settled each by the processor of its tenant, chosen by a header.
#[derive(Debug)]
pub struct Tenants<S, H> {
    header: String,
    tenants: BTreeMap<String, Processor<S, H>>,
    unrouted: Processor<S, H>,
    config: ConsumerConfig,
}

impl<S: Store, H: Handler<S::Db>> Tenants<S, H> {
    /// Routing by `header`, with no tenant yet; deliveries that name none of this process's
    /// tenants are dead-lettered through `unrouted` (an operator's database, or one tenant's).
    /// `config` is the consumer loop's, as for [`Consumer`](super::Consumer).
    pub fn new(
        header: impl Into<String>,
        unrouted: Processor<S, H>,
        config: ConsumerConfig,
    ) -> Self {
        Self {
            header: header.into(),
            tenants: BTreeMap::new(),
            unrouted,
            config,
        }
    }

    /// Adds `tenant`, whose deliveries `processor` settles (in the tenant's database).
    #[must_use]
    pub fn tenant(mut self, tenant: impl Into<String>, processor: Processor<S, H>) -> Self {
        self.tenants.insert(tenant.into(), processor);
        self
    }

    /// The tenant a delivery's header names and its processor, or why there is none.
    fn route<D: Delivery>(&self, delivery: &D) -> Result<(&str, &Processor<S, H>), Unrouted> {
        let header = &self.header;
        let Some(value) = delivery.header_value(header) else {
            return Err(Unrouted(format!(
                "header {header} is missing: it names the tenant, whose database takes the message"
            )));
        };
        let Ok(tenant) = std::str::from_utf8(&value) else {
            return Err(Unrouted(format!(
                "header {header} is not UTF-8 text: {}",
                escape_bytes(&value)
            )));
        };
        self.tenants
            .get_key_value(tenant)
            .map(|(t, p)| (t.as_str(), p))
            .ok_or_else(|| {
                Unrouted(format!(
                    "header {header} names tenant {tenant:?}, which has no database here"
                ))
            })
    }

    /// Runs until the source closes or `shutdown` resolves, as
    /// [`Consumer::run`](super::Consumer::run) does, each delivery settled by its tenant's
    /// processor. Batches are split by tenant, except on an in-order broker (Kafka), whose
    /// deliveries are settled one at a time in arrival order: acking a later offset would
    /// commit past an earlier one of another tenant.
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
        // No switch pauses the source: one tenant's outage must not hold back the others. Each
        // tenant's processor still forgives the transient failures its own switch judges an
        // outage. Nor does an overall rate limit: each tenant's processor applies its
        // per-bucket limit as it settles (a limit per tenant is a bucket per tenant). Boxed,
        // as in `Consumer::run`: the loop's state is large.
        Box::pin(drive(
            source,
            shutdown,
            config.concurrency,
            limits,
            None,
            None,
            |deliveries| {
                // Each delivery with the processor that settles it, decided before the task runs.
                let mut groups: HashMap<String, Group<S, H, Src::Delivery>> = HashMap::new();
                let mut unrouted = Vec::new();
                let mut in_order = Vec::new();
                for delivery in deliveries {
                    match self.route(&delivery) {
                        Ok((_, processor)) if delivery.ack_ordering() == AckOrdering::InOrder => {
                            in_order.push((Ok(processor.clone()), delivery));
                        }
                        Ok((tenant, processor)) => {
                            groups
                                .entry(tenant.to_owned())
                                .or_insert_with(|| (processor.clone(), Vec::new()))
                                .1
                                .push(delivery);
                        }
                        Err(why) if delivery.ack_ordering() == AckOrdering::InOrder => {
                            in_order.push((Err(why), delivery));
                        }
                        Err(why) => unrouted.push((why, delivery)),
                    }
                }
                let fallback = self.unrouted.clone();
                async move {
                    for (routed, delivery) in in_order {
                        match routed {
                            Ok(processor) => {
                                settle(&processor, delivery, extend).await?;
                            }
                            Err(why) => dead_letter(&fallback, delivery, &why).await?,
                        }
                    }
                    for (why, delivery) in unrouted {
                        dead_letter(&fallback, delivery, &why).await?;
                    }
                    for (processor, group) in groups.into_values() {
                        if batched {
                            settle_batch(&processor, group, extend).await?;
                        } else {
                            for delivery in group {
                                settle(&processor, delivery, extend).await?;
                            }
                        }
                    }
                    Ok(())
                }
            },
        ))
        .await
    }
}

/// Dead-letters a delivery no tenant takes through `processor`, then acks it. When the dead
/// letter cannot be written the delivery is requeued, or, on an in-order broker (whose next
/// ack would commit past it), tried again in place until it is.
async fn dead_letter<S: Store, H: Handler<S::Db>, D: Delivery>(
    processor: &Processor<S, H>,
    delivery: D,
    why: &Unrouted,
) -> Result<(), Error> {
    let in_order = delivery.ack_ordering() == AckOrdering::InOrder;
    let mut tries = 0;
    loop {
        match processor.dead_letter_invalid(delivery.payload(), why).await {
            Ok(_) => {
                return delivery
                    .ack()
                    .await
                    .map_err(Error::ack_failed("ack", why.0.clone()));
            }
            Err(e) if in_order => {
                tries += 1;
                tracing::warn!(error = %e, tries, "could not dead-letter a delivery no tenant takes; trying again in place");
                let outage = processor.failure_streak().failed();
                tokio::time::sleep(processor.config().ladder.after_outage(outage)).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not dead-letter a delivery no tenant takes; requeued");
                return delivery
                    .requeue(Some(processor.config().ladder.delay(1)))
                    .await
                    .map_err(Error::ack_failed("requeue", why.0.clone()));
            }
        }
    }
}
