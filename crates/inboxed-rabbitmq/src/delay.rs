//! Requeues that wait minutes: RabbitMQ cannot delay a requeue, so a delivery asked to come
//! back after one of [`RabbitConfig::delays`](crate::RabbitConfig::delays) or more is parked in
//! that step's delay queue and acked; the queue's TTL dead-letters it back to the source queue
//! when the step has passed. A step's queue is declared when first used, and copies go out on
//! a connection of their own.
//!
//! One queue per step, not one per message TTL: a queue expires messages at its head only, so
//! messages of different TTLs in one queue would wait for the longest ahead of them. Each delay
//! queue is a quorum queue that dead-letters at least once (`x-dead-letter-strategy`), so a
//! parked message is not lost between the two queues, and it lives in the broker: a consumer
//! that restarts, or dies, loses no delay. The copy is published with a confirm before the
//! original is acked. A crash between the two (or an ack that fails, or a confirm that comes
//! too late) leaves both: the original comes back at once and the copy after its step, each
//! run charged as an attempt, and the inbox settles whichever comes second once one succeeds.
//!
//! A message that comes back carries the broker's `x-death` header naming a delay queue of its
//! source, and the adapter counts it a redelivery (`RabbitDelivery::delivery_count`) whatever
//! its `redelivered` flag says: the flag and the queue's delivery count started again with the
//! copy.

use std::path::PathBuf;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, Confirmation, Connection};
use tokio::sync::Mutex;

use inboxed_core::BoxError;

use crate::config::RabbitConfig;

/// The delay queues of one source queue, published on a connection of their own.
#[derive(Debug)]
pub(crate) struct DelayQueues {
    uri: String,
    tls_ca_file: Option<PathBuf>,
    source: String,
    /// `(step, queue name)`, shortest step first.
    steps: Vec<(Duration, String)>,
    /// Bounds opening the parking connection and declaring a step's queue
    /// ([`RabbitConfig::connect_timeout`]).
    setup_within: Duration,
    /// Opened at the first park, and again after a park failed on it.
    open: Mutex<Option<Parking>>,
}

/// The connection copies are published on: not the consumer's own, so that a broker that
/// blocks publishing connections (a memory or disk alarm) never holds up the consumer's acks.
#[derive(Debug)]
struct Parking {
    #[allow(dead_code, reason = "holds the connection open for the channel")]
    conn: Connection,
    channel: Channel,
    /// Which steps' queues this connection has declared (a queue is declared when first used).
    declared: Vec<bool>,
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
    /// The delay queues `config` asks for; `None` when it asks for none. Nothing is opened or
    /// declared before the first park.
    pub(crate) fn new(config: &RabbitConfig) -> Option<Self> {
        if config.delays.is_empty() {
            return None;
        }
        let mut steps: Vec<_> = config
            .delays
            .iter()
            .map(|&step| (step, queue_name(&config.queue, step)))
            .collect();
        steps.sort();
        steps.dedup_by_key(|(step, _)| *step);
        Some(Self {
            uri: config.uri.clone(),
            tls_ca_file: config.tls_ca_file.clone(),
            source: config.queue.clone(),
            steps,
            setup_within: config.connect_timeout,
            open: Mutex::new(None),
        })
    }

    /// The step of the longest delay queue no longer than `delay`, if any.
    pub(crate) fn step_for(&self, delay: Duration) -> Option<Duration> {
        self.steps
            .iter()
            .rev()
            .find(|(step, _)| *step <= delay)
            .map(|(step, _)| *step)
    }

    /// Whether `queue` is one of this source's delay queues (a name in a message's `x-death`).
    pub(crate) fn is_delay_queue(&self, queue: &str) -> bool {
        queue
            .strip_prefix(self.source.as_str())
            .is_some_and(|rest| rest.starts_with(".delay."))
    }

    /// Publishes a copy of `delivery` to the delay queue of `step` and waits for the broker's
    /// confirm within `within` (the ack's budget). Opening the connection and declaring the
    /// step's queue happen once, at its first park, within the connect budget instead: a
    /// quorum queue's declare takes seconds on a loaded broker, and a park that ran out of
    /// time there would hold a delivery asked to wait a minute for one second. The copy keeps
    /// the body and properties but for the source queue's delivery counts, `expiration`
    /// (which would cut the wait short; RabbitMQ drops it when it dead-letters a message
    /// anyway) and `user_id` (which RabbitMQ checks against the publishing user, closing the
    /// channel when another user's is published). After a failure the connection is dropped
    /// and the next park opens another.
    pub(crate) async fn park(
        &self,
        step: Duration,
        delivery: &lapin::message::Delivery,
        within: Duration,
    ) -> Result<(), BoxError> {
        let mut open = self.open.lock().await;
        let parked = self.park_on(&mut open, step, delivery, within).await;
        if parked.is_err() {
            *open = None;
        }
        parked
    }

    async fn park_on(
        &self,
        open: &mut Option<Parking>,
        step: Duration,
        delivery: &lapin::message::Delivery,
        within: Duration,
    ) -> Result<(), BoxError> {
        let Some(index) = self.steps.iter().position(|(s, _)| *s == step) else {
            return Err(format!("no delay queue of {step:?}").into());
        };
        let queue = self.steps[index].1.as_str();
        let setup = tokio::time::timeout(self.setup_within, self.ready(open, index, step, queue));
        let channel = match setup.await {
            Ok(ready) => ready?,
            Err(_) => {
                let waited = self.setup_within;
                return Err(format!("delay queue {queue}: not declared within {waited:?}").into());
            }
        };
        let publish = async {
            let confirm = channel
                .basic_publish(
                    ShortString::from(""),
                    ShortString::from(queue),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    &delivery.data,
                    copy_properties(&delivery.properties),
                )
                .await?;
            confirm.await
        };
        let confirmation = tokio::time::timeout(within, publish)
            .await
            .map_err(|_| format!("delay queue {queue}: no confirm within {within:?}"))??;
        match confirmation {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(returned)) => Err(format!(
                "delay queue {queue}: unroutable (returned {} {})",
                returned.reply_code, returned.reply_text
            )
            .into()),
            Confirmation::Nack(_) => {
                Err(format!("delay queue {queue}: the broker could not store the copy").into())
            }
            Confirmation::NotRequested => {
                Err(format!("delay queue {queue}: the channel is not in confirm mode").into())
            }
        }
    }

    /// The parking channel, with the queue of step `index` declared on it: opened and
    /// declared here when not yet.
    async fn ready<'a>(
        &self,
        open: &'a mut Option<Parking>,
        index: usize,
        step: Duration,
        queue: &str,
    ) -> Result<&'a Channel, BoxError> {
        let parking = match open.take() {
            Some(parking) if parking.channel.status().connected() => open.insert(parking),
            _ => open.insert(self.connect().await?),
        };
        if !parking.declared[index] {
            self.declare(&parking.channel, step, queue).await?;
            parking.declared[index] = true;
        }
        Ok(&parking.channel)
    }

    async fn connect(&self) -> Result<Parking, BoxError> {
        let conn = crate::source::connection(&self.uri, self.tls_ca_file.as_deref()).await?;
        let channel = conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Parking {
            conn,
            channel,
            declared: vec![false; self.steps.len()],
        })
    }

    /// Declares the delay queue `name` of `step` (idempotent: one declared before with the
    /// same arguments is kept with its messages).
    async fn declare(&self, channel: &Channel, step: Duration, name: &str) -> lapin::Result<()> {
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
        channel
            .queue_declare(name.into(), QueueDeclareOptions::durable(), args)
            .await?;
        Ok(())
    }
}

/// The properties of a parked copy (see [`DelayQueues::park`]), persistent.
fn copy_properties(original: &lapin::BasicProperties) -> lapin::BasicProperties {
    let mut properties = lapin::BasicProperties::default();
    if let Some(v) = original.content_type() {
        properties = properties.with_content_type(v.clone());
    }
    if let Some(v) = original.content_encoding() {
        properties = properties.with_content_encoding(v.clone());
    }
    if let Some(headers) = original.headers() {
        let mut kept = FieldTable::default();
        for (name, value) in headers.inner() {
            if !matches!(name.as_str(), "x-delivery-count" | "x-acquired-count") {
                kept.insert(name.clone(), value.clone());
            }
        }
        properties = properties.with_headers(kept);
    }
    if let Some(v) = original.priority() {
        properties = properties.with_priority(*v);
    }
    if let Some(v) = original.correlation_id() {
        properties = properties.with_correlation_id(v.clone());
    }
    if let Some(v) = original.reply_to() {
        properties = properties.with_reply_to(v.clone());
    }
    if let Some(v) = original.message_id() {
        properties = properties.with_message_id(v.clone());
    }
    if let Some(v) = original.timestamp() {
        properties = properties.with_timestamp(*v);
    }
    if let Some(v) = original.kind() {
        properties = properties.with_type(v.clone());
    }
    if let Some(v) = original.app_id() {
        properties = properties.with_app_id(v.clone());
    }
    if let Some(v) = original.cluster_id() {
        properties = properties.with_cluster_id(v.clone());
    }
    properties.with_delivery_mode(2)
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
