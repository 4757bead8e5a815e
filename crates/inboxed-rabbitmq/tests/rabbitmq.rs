//! The RabbitMQ adapter against a real RabbitMQ (`INBOXED_AMQP_URL`, default the local broker)
//! and a real PostgreSQL: keys, redelivery counts, dead letters of keyless messages, and a
//! consumer process killed with SIGKILL between its commit and its ack.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use lapin::options::{BasicPublishOptions, QueueDeleteOptions};
use lapin::{BasicProperties, Channel};

use inboxed_core::{
    Consumer, ConsumerConfig, ConsumerName, Delivery, DeliverySource, KeySource, Processor,
};
use inboxed_rabbitmq::{QueueKind, RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::broker_child::{
    CRASH_MESSAGES, broker_child_locator, broker_child_main, killed_between_batch_commit_and_ack,
    killed_between_commit_and_ack, settle_duplicate_and_keyless, until_settled,
};
use inboxed_test::wire::ledger_processor as processor;
use inboxed_test::{Backend, Ledger, Pg, credit};

/// A fresh queue of `kind` for one test, and a channel to publish on.
async fn queue(kind: QueueKind) -> (Channel, String) {
    inboxed_test::amqp::queue_of_kind(&amqp_url(), kind == QueueKind::Quorum).await
}

async fn publish(channel: &Channel, queue: &str, id: Option<&str>, body: &[u8]) {
    let mut props = BasicProperties::default().with_delivery_mode(2);
    if let Some(id) = id {
        props = props.with_message_id(id.into());
    }
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            body,
            props,
        )
        .await
        .unwrap()
        .await
        .unwrap();
}

use inboxed_test::amqp::depth;

async fn drop_queue(channel: &Channel, queue: &str) {
    channel
        .queue_delete(queue.into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

async fn source(queue: &str, key: KeySource) -> RabbitSource {
    RabbitSource::connect(RabbitConfig::new(amqp_url(), queue).prefetch(1).key(key))
        .await
        .unwrap()
}

/// A published duplicate (same `message_id`) is processed once and both deliveries are acked;
/// a message without a key is dead-lettered and acked, never processed; a key can come from a
/// JSON field instead.
#[tokio::test]
async fn duplicates_and_keyless_messages_settle_with_the_broker() {
    let db = Pg::create().await;
    let (channel, name) = queue(QueueKind::Classic).await;
    let body = credit("a-1", 7).payload().to_vec();
    publish(&channel, &name, Some("a-1"), &body).await;
    publish(&channel, &name, Some("a-1"), &body).await;
    publish(&channel, &name, None, &body).await;
    let p = processor(&db);
    let mut src = source(&name, KeySource::MessageIdProperty).await;
    settle_duplicate_and_keyless(&db, &p, &mut src).await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'invalid_message'")
            .await,
        1
    );
    drop(src);
    assert_eq!(depth(&channel, &name).await, 0, "everything was acked");

    // The key can come from a field of the JSON body instead.
    let keyed = br#"{"amount": 3, "order": {"id": "o-9"}}"#;
    publish(&channel, &name, None, keyed).await;
    let mut src = source(&name, KeySource::JsonField("/order/id".into())).await;
    let d = src.next().await.unwrap().unwrap();
    assert_eq!(d.envelope().unwrap().id().as_str(), "o-9");
    drop_queue(&channel, &name).await;
    db.finish().await;
}

/// The consumer loop in batches (4 batches of up to 16 in flight, prefetch 64) over 300
/// messages, 60 of them published twice and one without a key: every effect lands once, the
/// keyless one is dead-lettered, everything is acked, and the batches of first deliveries
/// leave no attempt counter behind.
#[tokio::test]
async fn batches_settle_duplicates_once_and_ack_everything() {
    let db = Pg::create().await;
    let (channel, name) = queue(QueueKind::Classic).await;
    for i in 0..300_i64 {
        let id = format!("bt-{i}");
        let body = credit(&id, i + 1).payload().to_vec();
        publish(&channel, &name, Some(&id), &body).await;
        if i % 5 == 0 {
            publish(&channel, &name, Some(&id), &body).await;
        }
    }
    publish(&channel, &name, None, b"{}").await;
    let ledger = Ledger::<Pg>::default();
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        ledger.clone(),
    );
    let config = RabbitConfig::new(amqp_url(), name.as_str()).prefetch(64);
    let src = RabbitSource::connect(config).await.unwrap();
    Consumer::new(p, ConsumerConfig::default().concurrency(4).batch_size(16))
        .run(src, until_settled(&db, 300, 1))
        .await
        .unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&db).await,
        (300, 45_150)
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'invalid_message'")
            .await,
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_attempts").await, 0);
    assert!(ledger.batches() >= 300 / 16, "{} batches", ledger.batches());
    assert_eq!(depth(&channel, &name).await, 0, "everything was acked");
    drop_queue(&channel, &name).await;
    db.finish().await;
}

/// A first delivery counts 1 on every queue (the store then writes nothing). A quorum queue
/// counts redeliveries: a message requeued twice comes back with count 3. A classic queue only
/// flags a redelivery, which counts 2 (at least the second; the store counts the rest).
#[tokio::test]
async fn quorum_queues_count_deliveries() {
    for (kind, third) in [(QueueKind::Quorum, Some(3)), (QueueKind::Classic, Some(2))] {
        let (channel, name) = queue(kind).await;
        publish(&channel, &name, Some("q-1"), b"{}").await;
        let mut src = source(&name, KeySource::MessageIdProperty).await;
        let first = src.next().await.unwrap().unwrap();
        assert_eq!(first.delivery_count(), Some(1), "{kind:?}");
        assert!(first.is_first_delivery(), "{kind:?}");
        first
            .requeue(Some(Duration::from_millis(10)))
            .await
            .unwrap();
        let again = src.next().await.unwrap().unwrap();
        assert_eq!(again.envelope().unwrap().id().as_str(), "q-1");
        assert_eq!(again.delivery_count(), Some(2), "{kind:?}");
        assert!(!again.is_first_delivery(), "{kind:?}");
        again.requeue(None).await.unwrap();
        let third_delivery = src.next().await.unwrap().unwrap();
        assert_eq!(third_delivery.delivery_count(), third, "{kind:?}");
        third_delivery.ack().await.unwrap();
        drop_queue(&channel, &name).await;
    }
}

/// A consumer process killed with SIGKILL after its commit and before its ack: RabbitMQ
/// redelivers the unacked message to the restarted consumer, which settles it as a duplicate.
/// The ledger shows every effect once.
#[tokio::test]
async fn killed_between_commit_and_ack_applies_once() {
    let test = &inboxed_test::test_name!("killed_between_commit_and_ack_applies_once");
    if let Some(locator) = broker_child_locator() {
        let name = std::env::var("INBOXED_RABBIT_QUEUE").unwrap();
        let src = source(&name, KeySource::MessageIdProperty).await;
        return broker_child_main::<Pg, _>(&locator, src).await;
    }
    let db = Pg::create().await;
    let (channel, name) = queue(QueueKind::Classic).await;
    for (id, amount) in CRASH_MESSAGES {
        publish(&channel, &name, Some(id), credit(id, amount).payload()).await;
    }
    killed_between_commit_and_ack(test, &db, &[("INBOXED_RABBIT_QUEUE", name.as_str())]).await;
    assert_eq!(depth(&channel, &name).await, 0, "all acked");
    drop_queue(&channel, &name).await;
    db.finish().await;
}

/// The same kill in batch mode: a consumer process SIGKILLed after its batch committed and
/// before any of the batch's acks; the restarted consumer (also in batches) settles the three
/// redelivered messages as duplicates.
#[tokio::test]
async fn killed_between_batch_commit_and_ack_applies_once() {
    let test = &inboxed_test::test_name!("killed_between_batch_commit_and_ack_applies_once");
    if let Some(locator) = broker_child_locator() {
        let name = std::env::var("INBOXED_RABBIT_QUEUE").unwrap();
        let config = RabbitConfig::new(amqp_url(), name).prefetch(16);
        let src = RabbitSource::connect(config).await.unwrap();
        return broker_child_main::<Pg, _>(&locator, src).await;
    }
    let db = Pg::create().await;
    let (channel, name) = queue(QueueKind::Classic).await;
    for (id, amount) in CRASH_MESSAGES {
        publish(&channel, &name, Some(id), credit(id, amount).payload()).await;
    }
    let env = [("INBOXED_RABBIT_QUEUE", name.as_str())];
    killed_between_batch_commit_and_ack(test, &db, &env).await;
    assert_eq!(depth(&channel, &name).await, 0, "all acked");
    drop_queue(&channel, &name).await;
    db.finish().await;
}

/// The AMQP headers table reaches the envelope: text as text, a byte array that is not UTF-8
/// as its bytes, an integer in decimal; a nested table, which has no bytes, is left out; and a
/// header past the envelope's bound is left out without failing the message. The `timestamp`
/// property is when it was sent, and its W3C trace context reads from its `traceparent`.
#[tokio::test]
async fn the_headers_table_reaches_the_envelope() {
    use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString};
    let (channel, name) = queue(QueueKind::Classic).await;
    let mut table = FieldTable::default();
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    table.insert(
        "traceparent".into(),
        AMQPValue::LongString(traceparent.into()),
    );
    table.insert(
        "bin".into(),
        AMQPValue::ByteArray(ByteArray::from(vec![0xff, 0x00, b'a'])),
    );
    table.insert("n".into(), AMQPValue::LongLongInt(-7));
    table.insert(
        "nested".into(),
        AMQPValue::FieldTable(FieldTable::default()),
    );
    table.insert(
        "zz-big".into(),
        AMQPValue::LongString(LongString::from(vec![
            b'x';
            inboxed_core::Headers::MAX_BYTES
        ])),
    );
    let props = BasicProperties::default()
        .with_message_id("h-1".into())
        .with_timestamp(1_700_000_000)
        .with_headers(table);
    channel
        .basic_publish(
            "".into(),
            name.as_str().into(),
            BasicPublishOptions::default(),
            b"{}",
            props,
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let mut src = source(&name, KeySource::MessageIdProperty).await;
    let d = src.next().await.unwrap().unwrap();
    let envelope = d.envelope().unwrap();
    let headers = envelope.headers();
    assert_eq!(headers.get_str("traceparent"), Some(traceparent));
    assert_eq!(headers.get("bin"), Some(&[0xff, 0x00, b'a'][..]));
    assert_eq!(headers.get_str("n"), Some("-7"));
    assert_eq!(headers.get("nested"), None, "a table has no bytes");
    assert_eq!(headers.get("zz-big"), None, "past the bound: left out");
    assert_eq!(headers.len(), 3);
    assert_eq!(
        envelope.sent_at(),
        Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000))
    );
    assert_eq!(
        envelope.trace_context().map(|t| t.trace_id().to_owned()),
        Some("0af7651916cd43dd8448eb211c80319c".to_owned())
    );
    d.ack().await.unwrap();
    drop(src);
    drop_queue(&channel, &name).await;
}
