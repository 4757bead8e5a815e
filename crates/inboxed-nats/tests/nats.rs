//! The JetStream adapter against a real NATS server with JetStream (`INBOXED_NATS_URL`, default
//! the local server) and a real PostgreSQL: keys, delivery counts, dead letters of keyless
//! messages, and a consumer process killed with SIGKILL between its commit and its ack.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context};

use inboxed_core::{ConsumerName, Delivery, DeliverySource, KeySource, Processor};
use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_test::broker_child::{
    CRASH_MESSAGES, broker_child_locator, broker_child_main, killed_between_commit_and_ack,
    settle_duplicate_and_keyless,
};
use inboxed_test::{Backend, Ledger, Pg, credit};

/// `ack_wait` of the tests that need no redelivery: no stall of a busy machine reaches it.
const LONG: Duration = Duration::from_secs(30);

fn nats_url() -> String {
    std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// A fresh stream for one test: its name and subject, and a context to publish with.
async fn stream() -> (Context, String, String) {
    let client = async_nats::connect(nats_url())
        .await
        .expect("NATS must be running: scripts/test.sh starts it");
    let js = jetstream::new(client);
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (name, subject) = (format!("INBOXED_TEST_{tag}"), format!("inboxed.test.{tag}"));
    inboxed_test::nats::create_stream(&js, &name, &subject).await;
    (js, name, subject)
}

async fn publish(js: &Context, subject: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.insert(*k, *v);
    }
    js.publish_with_headers(subject.to_owned(), map, body.to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

/// A source with prefetch 1; `ack_wait` short only where a test waits for a redelivery.
async fn source(stream: &str, key: KeySource, ack_wait: Duration) -> NatsSource {
    let config = NatsConfig::new(nats_url(), stream, "ledger")
        .prefetch(1)
        .ack_wait(ack_wait)
        .key(key);
    NatsSource::connect(config).await.unwrap()
}

/// A duplicate (same key) is processed once and both messages are acked; a message without a
/// key is dead-lettered and acked, never processed. The key here is a header of our own:
/// `Nats-Msg-Id` would make the server drop the duplicate publish inside its window.
#[tokio::test]
async fn duplicates_and_keyless_messages_settle_with_the_server() {
    let db = Pg::create().await;
    let (js, name, subject) = stream().await;
    let body = credit("n-1", 7).payload().to_vec();
    publish(&js, &subject, &[("x-id", "n-1")], &body).await;
    publish(&js, &subject, &[("x-id", "n-1")], &body).await;
    publish(&js, &subject, &[], &body).await;
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let mut src = source(&name, KeySource::Header("x-id".into()), LONG).await;
    settle_duplicate_and_keyless(&db, &p, &mut src).await;
    let mut consumer: jetstream::consumer::PullConsumer = js
        .get_stream(&name)
        .await
        .unwrap()
        .get_consumer("ledger")
        .await
        .unwrap();
    let info = consumer.info().await.unwrap();
    assert_eq!(
        (info.num_ack_pending, info.num_pending),
        (0, 0),
        "every message acked"
    );
    js.delete_stream(&name).await.unwrap();
    db.finish().await;
}

/// The server counts deliveries: a message nak'ed once comes back with count 2, which the
/// processor uses as its attempt number; `Nats-Msg-Id` is the default key.
#[tokio::test]
async fn nak_redelivers_with_a_count() {
    let (js, name, subject) = stream().await;
    publish(&js, &subject, &[("Nats-Msg-Id", "c-1")], b"{}").await;
    let mut src = source(&name, KeySource::MessageIdProperty, LONG).await;
    let first = src.next().await.unwrap().unwrap();
    assert_eq!(first.envelope().unwrap().id().as_str(), "c-1");
    assert_eq!(first.delivery_count(), Some(1));
    first
        .requeue(Some(Duration::from_millis(50)))
        .await
        .unwrap();
    let again = src.next().await.unwrap().unwrap();
    assert_eq!(again.envelope().unwrap().id().as_str(), "c-1");
    assert_eq!(again.delivery_count(), Some(2));
    again.ack().await.unwrap();
    js.delete_stream(&name).await.unwrap();
}

/// A consumer process killed with SIGKILL after its commit and before its ack: the server
/// redelivers the unacked message after `ack_wait` to the restarted consumer, which settles it
/// as a duplicate. The ledger shows every effect once.
#[tokio::test]
async fn killed_between_commit_and_ack_applies_once() {
    let test = &inboxed_test::test_name!("killed_between_commit_and_ack_applies_once");
    if let Some(locator) = broker_child_locator() {
        let name = std::env::var("INBOXED_NATS_STREAM").unwrap();
        let src = source(&name, KeySource::MessageIdProperty, Duration::from_secs(2)).await;
        return broker_child_main::<Pg, _>(&locator, src).await;
    }
    let db = Pg::create().await;
    let (js, name, subject) = stream().await;
    for (id, amount) in CRASH_MESSAGES {
        let body = credit(id, amount).payload().to_vec();
        publish(&js, &subject, &[("Nats-Msg-Id", id)], &body).await;
    }
    killed_between_commit_and_ack(test, &db, &[("INBOXED_NATS_STREAM", name.as_str())]).await;
    js.delete_stream(&name).await.unwrap();
    db.finish().await;
}

/// The message's NATS headers reach the envelope, a repeated name with each of its values,
/// sorted by name; the id header among them.
#[tokio::test]
async fn the_headers_reach_the_envelope() {
    let (js, name, subject) = stream().await;
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let mut map = HeaderMap::new();
    map.insert("x-id", "h-1");
    map.insert("traceparent", traceparent);
    map.append("tag", "a");
    map.append("tag", "b");
    js.publish_with_headers(subject.clone(), map, b"{}".to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let mut src = source(&name, KeySource::Header("x-id".into()), LONG).await;
    let d = src.next().await.unwrap().unwrap();
    let envelope = d.envelope().unwrap();
    let headers = envelope.headers();
    inboxed_test::assert_sent_recently(&envelope);
    assert_eq!(headers.get_str("traceparent"), Some(traceparent));
    let tags: Vec<&[u8]> = headers
        .iter()
        .filter(|(n, _)| *n == "tag")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(tags.len(), 2, "both values of a repeated name");
    assert_eq!(headers.get_str("x-id"), Some("h-1"));
    let names: Vec<&str> = headers.iter().map(|(n, _)| n).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "sorted by name");
    d.ack().await.unwrap();
}
