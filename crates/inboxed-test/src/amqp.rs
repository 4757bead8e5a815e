//! RabbitMQ for the tests that publish many keyed messages: a durable queue of a test's own and
//! the restart audit's messages, confirmed by the broker.

use std::ops::Range;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use crate::handler::credit;
use crate::restart::amount;

/// A channel on `url` with a fresh durable queue declared; returns both.
///
/// # Panics
/// When RabbitMQ is not reachable at `url`.
pub async fn queue(url: &str) -> (Channel, String) {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("RabbitMQ must be running: scripts/test.sh starts it");
    let channel = conn.create_channel().await.expect("channel");
    let name = format!("inboxed-test-{}", uuid::Uuid::new_v4());
    declare(&channel, &name).await;
    (channel, name)
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
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("publisher confirms");
    for i in ids {
        let id = format!("{prefix}-{i}");
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(id.as_str().into());
        channel
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                credit(&id, amount(i)).payload(),
                props,
            )
            .await
            .expect("publish");
    }
    channel.wait_for_confirms().await.expect("confirms");
}
