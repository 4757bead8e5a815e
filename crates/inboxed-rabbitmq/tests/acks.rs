//! Acks of many deliveries in one frame (`basic.ack` with `multiple`), against a real
//! RabbitMQ (`INBOXED_AMQP_URL`, default the local broker): batches of one channel commit in
//! any order, and a frame that answered every delivery up to its tag would ack deliveries of
//! another batch still being stored, or one waiting to be rejected. What the broker delivers
//! again after the connection closes shows what was answered.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use lapin::options::QueueDeleteOptions;

use inboxed_core::{Delivery, DeliverySource};
use inboxed_rabbitmq::{RabbitConfig, RabbitDelivery, RabbitSource};
use inboxed_test::amqp::url as amqp_url;

async fn take(source: &mut RabbitSource, n: usize) -> Vec<RabbitDelivery> {
    let mut taken = Vec::new();
    for _ in 0..n {
        let next = tokio::time::timeout(Duration::from_secs(10), source.next());
        taken.push(next.await.expect("a delivery").unwrap().unwrap());
    }
    taken
}

fn id(d: &RabbitDelivery) -> String {
    d.envelope().unwrap().id().as_str().to_owned()
}

#[tokio::test]
async fn an_ack_of_many_never_settles_a_delivery_of_another_batch() {
    let (channel, queue) = inboxed_test::amqp::queue_of_kind(&amqp_url(), false).await;
    inboxed_test::amqp::publish_keyed(&channel, &queue, "m", 1..9).await;
    let config = RabbitConfig::new(amqp_url(), queue.clone()).prefetch(16);
    let mut source = RabbitSource::connect(config.clone()).await.unwrap();
    let mut d: Vec<Option<RabbitDelivery>> =
        take(&mut source, 8).await.into_iter().map(Some).collect();
    let mut batch = |tags: &[usize]| -> Vec<RabbitDelivery> {
        tags.iter().map(|&t| d[t - 1].take().unwrap()).collect()
    };
    // The later batch commits first: m-1 to m-3 are still being stored.
    RabbitDelivery::ack_all(batch(&[4, 5, 6])).await.unwrap();
    // m-1 is handed back; m-2 is then the lowest unanswered and covered by its own batch.
    let back = batch(&[1]);
    back.into_iter()
        .next()
        .unwrap()
        .requeue(None)
        .await
        .unwrap();
    RabbitDelivery::ack_all(batch(&[2])).await.unwrap();
    // m-3 is dropped unanswered (a shutdown leaves it); m-7 and m-8 above it are acked.
    drop(batch(&[3]));
    RabbitDelivery::ack_all(batch(&[7, 8])).await.unwrap();
    drop(source);

    let mut again = RabbitSource::connect(config).await.unwrap();
    let mut redelivered: Vec<String> = take(&mut again, 2).await.iter().map(id).collect();
    redelivered.sort();
    assert_eq!(
        redelivered,
        ["m-1", "m-3"],
        "only the handed-back and the unanswered deliveries come again"
    );
    let more = tokio::time::timeout(Duration::from_millis(500), again.next()).await;
    assert!(more.is_err(), "nothing else was left unacked");
    drop(again);
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}
