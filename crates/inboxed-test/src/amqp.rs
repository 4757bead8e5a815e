//! RabbitMQ for the tests that publish many keyed messages: a durable queue of a test's own and
//! the restart audit's messages, confirmed by the broker.

use std::ops::Range;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use crate::handler::credit;
use crate::restart::amount;

/// The RabbitMQ the tests use: `INBOXED_AMQP_URL`, default the local broker (guest on the
/// default virtual host).
#[must_use]
pub fn url() -> String {
    std::env::var("INBOXED_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// A channel on `url` with a fresh durable queue declared; returns both.
///
/// # Panics
/// When RabbitMQ is not reachable at `url`.
pub async fn queue(url: &str) -> (Channel, String) {
    queue_of_kind(url, false).await
}

/// A channel on `url` with a fresh durable queue declared, a quorum queue if `quorum`, else a
/// classic one; returns both.
///
/// # Panics
/// When RabbitMQ is not reachable at `url`.
pub async fn queue_of_kind(url: &str, quorum: bool) -> (Channel, String) {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("RabbitMQ must be running: scripts/test.sh starts it");
    let channel = conn.create_channel().await.expect("channel");
    let name = format!("inboxed-test-{}", uuid::Uuid::new_v4());
    let mut args = FieldTable::default();
    if quorum {
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
    }
    channel
        .queue_declare(name.as_str().into(), QueueDeclareOptions::durable(), args)
        .await
        .expect("declare the queue");
    (channel, name)
}

/// Messages left in `queue` once no consumer holds any: waits for the consumers' channels to
/// close (their unacked messages then return to the queue), then counts.
///
/// # Panics
/// When a consumer still holds the queue after 5 s.
pub async fn depth(channel: &Channel, queue: &str) -> u32 {
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    for _ in 0..100 {
        let q = channel
            .queue_declare(queue.into(), passive, FieldTable::default())
            .await
            .expect("the queue exists");
        if q.consumer_count() == 0 {
            return q.message_count();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("a consumer still holds queue {queue}");
}

/// Declares the durable classic queue `name`.
///
/// # Panics
/// When the broker refuses.
pub async fn declare(channel: &Channel, name: &str) {
    channel
        .queue_declare(
            name.into(),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await
        .expect("declare the queue");
}

/// Publishes persistent messages `<prefix>-<i>` (their AMQP `message_id`) crediting
/// [`amount`]`(i)` for every `i` in `ids`, and waits until the broker has confirmed them all.
///
/// # Panics
/// When a publish is refused or not confirmed.
pub async fn publish_keyed(channel: &Channel, queue: &str, prefix: &str, ids: Range<i64>) {
    publish_all(
        channel,
        queue,
        ids.map(|i| credit(&format!("{prefix}-{i}"), amount(i))),
    )
    .await;
}

/// Publishes `messages` to `queue` (persistent, the envelope's id as the AMQP message id, its
/// headers as the AMQP headers table) and waits until the broker has confirmed them all.
///
/// # Panics
/// When a publish is refused or not confirmed.
pub async fn publish_all(
    channel: &Channel,
    queue: &str,
    messages: impl IntoIterator<Item = inboxed_core::Envelope>,
) {
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("publisher confirms");
    for message in messages {
        let mut props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(message.id().as_str().into());
        if !message.headers().is_empty() {
            let mut table = lapin::types::FieldTable::default();
            for (name, value) in message.headers().iter() {
                table.insert(
                    name.into(),
                    lapin::types::AMQPValue::LongString(value.to_vec().into()),
                );
            }
            props = props.with_headers(table);
        }
        channel
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                message.payload(),
                props,
            )
            .await
            .expect("publish");
    }
    channel.wait_for_confirms().await.expect("confirms");
}
