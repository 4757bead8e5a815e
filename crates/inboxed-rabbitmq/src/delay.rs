//! Requeues that wait minutes: RabbitMQ cannot delay a requeue, so a delivery asked to come
//! back after one of [`RabbitConfig::delays`](crate::RabbitConfig::delays) or more is parked in
//! that step's delay queue and acked; the queue's TTL dead-letters it back to the source queue
//! when the step has passed. A step's queue is declared when first used.
//!
//! One queue per step, not one per message TTL: a queue expires messages at its head only, so
//! messages of different TTLs in one queue would wait for the longest ahead of them. Each delay
//! queue is a quorum queue that dead-letters at least once (`x-dead-letter-strategy`), so a
//! parked message is not lost between the two queues, and it lives in the broker: a consumer
//! that restarts, or dies, loses no delay. The copy is published with a confirm before the
//! original is acked; a crash between the two leaves both, and the inbox settles the second as
//! a duplicate.
//!
//! A message that comes back carries the broker's `x-death` header, and the adapter counts it
//! a redelivery (`RabbitDelivery::delivery_count`) whatever its `redelivered` flag says: the
//! flag and the queue's delivery count started again with the copy.

use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, Confirmation, Connection};

use inboxed_core::BoxError;
use tokio::sync::OnceCell;

/// The delay queues of one source queue, and the confirmed channel they are published on.
#[derive(Debug)]
pub(crate) struct DelayQueues {
    channel: Channel,
    source: String,
    /// `(step, queue name, declared)`, shortest step first. Each is declared when first used:
    /// a consumer that never waits long makes no queue.
    steps: Vec<(Duration, String, OnceCell<()>)>,
}

/// The name of `queue`'s delay queue for `step`: `orders.delay.10s`, `orders.delay.5m`.
#[must_use]
pub(crate) fn queue_name(queue: &str, step: Duration) -> String {
    let ms = step.as_millis();
    let unit = if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1_000) {
        format!("{}s", ms / 1_000)
    } else {
        format!("{ms}ms")
    };
    format!("{queue}.delay.{unit}")
}

impl DelayQueues {
    /// `queue`'s delay queues for `steps`, published on a new channel in confirm mode; `None`
    /// when there are no steps.
    pub(crate) async fn open(
        conn: &Connection,
        queue: &str,
        steps: &[Duration],
    ) -> lapin::Result<Option<Self>> {
        if steps.is_empty() {
            return Ok(None);
        }
        let channel = conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let mut steps: Vec<_> = steps
            .iter()
            .map(|&step| (step, queue_name(queue, step), OnceCell::new()))
            .collect();
        steps.sort_by_key(|(step, _, _)| *step);
        Ok(Some(Self {
            channel,
            source: queue.to_owned(),
            steps,
        }))
    }

    /// Declares the delay queue `(step, name)` (idempotent: one declared before with the same
    /// arguments is kept with its messages).
    async fn declare(&self, step: Duration, name: &str) -> lapin::Result<()> {
        let mut args = FieldTable::default();
        let text = |s: &str| AMQPValue::LongString(s.into());
        args.insert("x-queue-type".into(), text("quorum"));
        let ttl = i64::try_from(step.as_millis()).unwrap_or(i64::MAX);
        args.insert("x-message-ttl".into(), AMQPValue::LongLongInt(ttl));
        args.insert("x-dead-letter-exchange".into(), text(""));
        args.insert("x-dead-letter-routing-key".into(), text(&self.source));
        // At-least-once dead-lettering needs the queue to refuse publishes when full rather
        // than drop its head.
        args.insert("x-dead-letter-strategy".into(), text("at-least-once"));
        args.insert("x-overflow".into(), text("reject-publish"));
        self.channel
            .queue_declare(name.into(), QueueDeclareOptions::durable(), args)
            .await?;
        Ok(())
    }

    /// The step of the longest delay queue no longer than `delay`, if any.
    pub(crate) fn step_for(&self, delay: Duration) -> Option<Duration> {
        self.steps
            .iter()
            .rev()
            .find(|(step, _, _)| *step <= delay)
            .map(|(step, _, _)| *step)
    }

    /// Publishes a copy of `delivery` (its body and properties, without the source queue's
    /// delivery counts) to the delay queue of `step` (declared first if this is its first
    /// use) and waits up to `within` for the broker's confirm.
    pub(crate) async fn park(
        &self,
        step: Duration,
        delivery: &lapin::message::Delivery,
        within: Duration,
    ) -> Result<(), BoxError> {
        let Some((_, queue, declared)) = self.steps.iter().find(|(s, _, _)| *s == step) else {
            return Err(format!("no delay queue of {step:?}").into());
        };
        let queue = queue.as_str();
        let mut properties = delivery.properties.clone();
        if let Some(headers) = properties.headers().as_ref() {
            let mut kept = FieldTable::default();
            for (name, value) in headers.inner() {
                if !matches!(name.as_str(), "x-delivery-count" | "x-acquired-count") {
                    kept.insert(name.clone(), value.clone());
                }
            }
            properties = properties.with_headers(kept);
        }
        let published = async {
            declared
                .get_or_try_init(|| self.declare(step, queue))
                .await?;
            let confirm = self
                .channel
                .basic_publish(
                    ShortString::from(""),
                    ShortString::from(queue),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    &delivery.data,
                    properties.with_delivery_mode(2),
                )
                .await?;
            confirm.await
        };
        match tokio::time::timeout(within, published).await {
            Ok(Ok(Confirmation::Ack(None))) => Ok(()),
            Ok(Ok(Confirmation::Ack(Some(returned)))) => Err(format!(
                "delay queue {queue}: unroutable (returned {} {})",
                returned.reply_code, returned.reply_text
            )
            .into()),
            Ok(Ok(Confirmation::Nack(_))) => {
                Err(format!("delay queue {queue}: the broker could not store the copy").into())
            }
            Ok(Ok(Confirmation::NotRequested)) => {
                Err(format!("delay queue {queue}: the channel is not in confirm mode").into())
            }
            Ok(Err(e)) => Err(Box::new(e)),
            Err(_) => Err(format!("delay queue {queue}: no confirm within {within:?}").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_the_step() {
        let name = |ms| queue_name("orders", Duration::from_millis(ms));
        assert_eq!(name(10_000), "orders.delay.10s");
        assert_eq!(name(60_000), "orders.delay.1m");
        assert_eq!(name(900_000), "orders.delay.15m");
        assert_eq!(name(7_200_000), "orders.delay.2h");
        assert_eq!(name(1_500), "orders.delay.1500ms");
    }
}
