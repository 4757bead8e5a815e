//! The outbox relay through a real Kafka-API broker into a real PostgreSQL inbox downstream:
//! records published once each with the outbox id in the `message_id` header and the ordering
//! key as the record key (so a key's records keep their order in one partition), a re-send
//! after a crash settled downstream as a duplicate, refused rows dead naming the field while
//! the rest are published.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use inboxed_core::outbox::{OutboxRelay, OutgoingMessage, TYPE_HEADER};
use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor};
use inboxed_kafka::{
    KafkaConfig, KafkaPublisher, KafkaPublisherConfig, KafkaSetupError, KafkaSource,
};
use inboxed_test::broker_child::until_settled;
use inboxed_test::outbox::{
    SENT, dead_after_relaying, relay_config, relay_until, unmark_first, write,
};
use inboxed_test::{Backend, Pg, credit};

use common::{brokers, topic, topic_with};

/// One record as read back: partition, key, headers, payload.
#[derive(Debug)]
struct Record {
    partition: i32,
    key: Option<String>,
    headers: BTreeMap<String, Vec<u8>>,
    payload: Vec<u8>,
}

/// Every record of `topic` (of `partitions` partitions), each partition in offset order:
/// exactly `want` of them (a second passes with no more after the last).
fn records(topic: &str, partitions: i32, want: usize) -> Vec<Record> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", format!("reader-{topic}"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut out = Vec::new();
    let mut quiet = 0;
    for _ in 0..300 {
        // Past `want`, a second without records: every record is in.
        if out.len() >= want && quiet >= 10 {
            break;
        }
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            quiet += 1;
            continue;
        };
        quiet = 0;
        let message = message.unwrap();
        let headers = message.headers().map_or_else(BTreeMap::new, |h| {
            h.iter()
                .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
                .collect()
        });
        out.push(Record {
            partition: message.partition(),
            key: message
                .key()
                .map(|k| String::from_utf8(k.to_vec()).unwrap()),
            headers,
            payload: message.payload().unwrap_or_default().to_vec(),
        });
    }
    assert_eq!(out.len(), want, "records read back from {topic}");
    out
}

/// 30 credits published once each, their bytes, key and headers as written; 10 of them
/// re-sent as after a crash between the acknowledgement and the mark (Kafka keeps no ids:
/// 40 records), and an inboxed consumer downstream credits each once all the same.
#[tokio::test]
async fn committed_rows_are_published_once_and_resends_are_settled_downstream() {
    let upstream = Pg::create().await;
    let downstream = Pg::create().await;
    let topic = topic().await;
    let credits: Vec<OutgoingMessage> = (0..30_i64)
        .map(|i| {
            OutgoingMessage::new(
                "ledger.credits",
                credit(&format!("c-{i}"), i + 1).payload().to_vec(),
            )
            .with_type("Credit")
            .with_key(format!("account-{}", i % 3))
            .with_header("schema", "v1")
        })
        .collect();
    let ids = write(&upstream.store, &credits).await;
    let publisher = KafkaPublisher::connect(
        KafkaPublisherConfig::new(brokers()).topic("ledger.credits", &topic),
    )
    .await
    .unwrap();
    let relay = OutboxRelay::new(upstream.store.clone(), publisher, relay_config());
    relay_until(&relay, &upstream.store, SENT, 30).await;
    // The relay keeps each key's order, not the order across keys: c-0's record is found by
    // its id (it was first only when account-0's rows happened to be published first).
    let published = records(&topic, 1, 30);
    let first = published
        .iter()
        .find(|r| r.headers.get("message_id").map(Vec::as_slice) == Some(ids[0].as_bytes()))
        .expect("c-0's record");
    assert_eq!(first.headers[TYPE_HEADER], b"Credit");
    assert_eq!(first.headers["schema"], b"v1");
    assert_eq!(first.key.as_deref(), Some("account-0"));
    assert_eq!(first.payload, credits[0].payload());

    unmark_first(&upstream.store, 10).await;
    relay_until(&relay, &upstream.store, SENT, 30).await;
    records(&topic, 1, 40);

    let processor = Processor::new(
        downstream.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        inboxed_test::Ledger::<Pg>::default(),
    );
    let source = KafkaSource::connect(KafkaConfig::new(
        brokers(),
        format!("ledger-{topic}"),
        [&topic],
    ))
    .await
    .unwrap();
    Consumer::new(processor, ConsumerConfig::default())
        .run(source, until_settled(&downstream, 30, 0))
        .await
        .unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&downstream).await,
        (30, 465),
        "each credit applied once, the 10 re-sent records settled as duplicates"
    );
    upstream.finish().await;
    downstream.finish().await;
}

/// Four relays at once on a three-partition topic: each key's records land in one partition,
/// in the order they were written.
#[tokio::test]
async fn a_keys_records_keep_their_order_in_one_partition() {
    let db = Pg::create().await;
    let topic = topic_with(3).await;
    let messages: Vec<OutgoingMessage> = (0..120)
        .map(|i| {
            OutgoingMessage::new(&topic, format!("{i}").into_bytes())
                .with_key(format!("k{}", i % 6))
        })
        .collect();
    write(&db.store, &messages).await;
    let mut relays = Vec::new();
    for _ in 0..4 {
        let publisher = KafkaPublisher::connect(KafkaPublisherConfig::new(brokers()))
            .await
            .unwrap();
        relays.push(OutboxRelay::new(
            db.store.clone(),
            publisher,
            relay_config().batch_size(4),
        ));
    }
    tokio::join!(
        relay_until(&relays[0], &db.store, SENT, 120),
        relay_until(&relays[1], &db.store, SENT, 120),
        relay_until(&relays[2], &db.store, SENT, 120),
        relay_until(&relays[3], &db.store, SENT, 120),
    );
    let mut by_key: BTreeMap<String, (i32, Vec<u32>)> = BTreeMap::new();
    for r in records(&topic, 3, 120) {
        let entry = by_key
            .entry(r.key.unwrap())
            .or_insert((r.partition, Vec::new()));
        assert_eq!(entry.0, r.partition, "a key's records share a partition");
        entry
            .1
            .push(String::from_utf8(r.payload).unwrap().parse().unwrap());
    }
    assert_eq!(by_key.len(), 6);
    for (key, (_, order)) in by_key {
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted, "key {key} in insert order");
        assert_eq!(order.len(), 20);
    }
    db.finish().await;
}

/// An illegal topic name, a record over `max_message_bytes` and a header named as the
/// publisher's own `message_id` go dead at once, each naming its field, while the ten rows
/// after them are published.
#[tokio::test]
async fn refused_rows_go_dead_without_holding_up_the_rest() {
    let db = Pg::create().await;
    let topic = topic().await;
    let mut messages = vec![
        OutgoingMessage::new("no spaces allowed", b"x".to_vec()),
        OutgoingMessage::new(&topic, vec![7; 20_000]),
        OutgoingMessage::new(&topic, b"y".to_vec()).with_header("message_id", "forged"),
    ];
    messages.extend((0..10).map(|i| OutgoingMessage::new(&topic, vec![i])));
    write(&db.store, &messages).await;
    let publisher =
        KafkaPublisher::connect(KafkaPublisherConfig::new(brokers()).max_message_bytes(10_000))
            .await
            .unwrap();
    let relay = OutboxRelay::new(db.store.clone(), publisher, relay_config().max_attempts(3));
    let dead = dead_after_relaying(&relay, &db.store, 13, 10).await;
    assert_eq!(dead.len(), 3, "{dead:?}");
    assert!(
        dead.iter().all(|(attempts, _)| *attempts == 1),
        "dead at once: {dead:?}"
    );
    assert!(
        dead[0].1.contains("destination") && dead[0].1.contains("no spaces allowed"),
        "{}",
        dead[0].1
    );
    assert!(
        dead[1].1.contains("too large") || dead[1].1.contains("size"),
        "{}",
        dead[1].1
    );
    assert!(
        dead[2].1.contains("headers") && dead[2].1.contains("message_id"),
        "{}",
        dead[2].1
    );
    assert_eq!(records(&topic, 1, 10).len(), 10);
    db.finish().await;
}

/// A wrong address fails at `connect`, naming the step, instead of retrying for ever.
#[tokio::test]
async fn unreachable_brokers_fail_at_connect() {
    let mut config = KafkaPublisherConfig::new("127.0.0.1:1");
    config.connect_timeout = Duration::from_secs(2);
    let err = KafkaPublisher::connect(config).await.unwrap_err();
    assert!(
        matches!(
            err,
            KafkaSetupError::Producer {
                step: "reach the brokers",
                ..
            }
        ),
        "{err}"
    );
}
