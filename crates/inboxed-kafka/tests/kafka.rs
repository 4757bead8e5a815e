//! The Kafka adapter against a real Kafka-API broker (`INBOXED_KAFKA_BROKERS`, default the
//! local one on port 19092 that scripts/test.sh starts) and a real PostgreSQL: header and JSON
//! keys, dead letters of keyless records, offsets committed only for committed records, and a
//! consumer process killed with SIGKILL between its commit and its ack.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use inboxed_core::{
    Consumer as InboxConsumer, ConsumerConfig, ConsumerName, Delivery, DeliverySource, KeySource,
    Processor,
};
use inboxed_kafka::{KafkaConfig, KafkaSource};
use inboxed_test::broker_child::{
    CRASH_MESSAGES, broker_child_locator, broker_child_main, killed_between_commit_and_ack,
    settle_duplicate_and_keyless, until_settled,
};
use inboxed_test::{Backend, Ledger, Pg, Script, credit};

use common::{brokers, topic};

/// Publishes `body` with the given headers and waits for the broker's acknowledgement.
async fn publish(topic: &str, headers: &[(&str, &str)], body: &[u8]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    let mut owned = OwnedHeaders::new();
    for (key, value) in headers {
        owned = owned.insert(Header {
            key,
            value: Some(*value),
        });
    }
    let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(topic).payload(body).headers(owned);
    producer
        .send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .unwrap();
}

/// Settings for `group` on `topic`; the group's name is made unique to the topic, since a
/// Kafka group spans topics and its rebalances would couple the tests.
fn config(topic: &str, group: &str) -> KafkaConfig {
    KafkaConfig::new(brokers(), format!("{group}-{topic}"), [topic])
        .commit_interval(Duration::from_millis(100))
        // A killed member's partitions move to the restarted one after this.
        .property("session.timeout.ms", "6000")
}

/// The offset `group` has committed on partition 0 of `topic`.
fn committed(topic: &str, group: &str) -> Offset {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", format!("{group}-{topic}"))
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let tpl = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .unwrap();
    tpl.find_partition(topic, 0).unwrap().offset()
}

/// A duplicate (same `message_id` header) is processed once and both records are acked; a
/// record without one is dead-lettered and acked, never processed. The group's committed
/// offset reaches the end only through those acks. A JSON-field key works too.
#[tokio::test]
async fn duplicates_and_keyless_records_commit_their_offsets() {
    let db = Pg::create().await;
    let name = topic().await;
    let body = credit("f-1", 7).payload().to_vec();
    publish(&name, &[("message_id", "f-1")], &body).await;
    publish(&name, &[("message_id", "f-1")], &body).await;
    publish(&name, &[("other", "x")], &body).await;
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let mut src = KafkaSource::connect(config(&name, "ledger")).await.unwrap();
    settle_duplicate_and_keyless(&db, &p, &mut src).await;
    drop(src);
    assert_eq!(
        committed(&name, "ledger"),
        Offset::Offset(3),
        "all three acked"
    );

    publish(&name, &[], br#"{"order":{"id":"o-4"}}"#).await;
    let by_field = config(&name, "by-field").key(KeySource::JsonField("/order/id".into()));
    let mut by_field = KafkaSource::connect(by_field).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..4 {
        let d = by_field.next().await.unwrap().unwrap();
        ids.push(d.envelope().map(|e| e.id().as_str().to_owned()));
    }
    assert!(ids.contains(&Ok("o-4".to_owned())), "{ids:?}");
    db.finish().await;
}

/// The consumer loop in batches of up to 16 over 61 records: a record that fails on its first
/// two handler calls (first in the topic, so its batch fails and it is then retried in place),
/// 40 keyed records, 10 producer retries of them and a keyless record. Every effect lands once,
/// the keyless record is dead-lettered, and the group's offset reaches the end only through
/// the in-order acks.
#[tokio::test]
async fn batches_ack_in_order_and_retry_in_place() {
    let db = Pg::create().await;
    let name = topic().await;
    let flaky = Script {
        amount: 1000,
        fail_first: 2,
        ..Script::default()
    }
    .message("kb-flaky");
    publish(&name, &[("message_id", "kb-flaky")], flaky.payload()).await;
    for i in 0..40_i64 {
        let id = format!("kb-{i}");
        let body = credit(&id, i + 1).payload().to_vec();
        publish(&name, &[("message_id", id.as_str())], &body).await;
        if i % 4 == 0 {
            publish(&name, &[("message_id", id.as_str())], &body).await;
        }
    }
    publish(&name, &[], b"{}").await;
    let ledger = Ledger::<Pg>::default();
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        ledger.clone(),
    );
    let src = KafkaSource::connect(config(&name, "ledger")).await.unwrap();
    InboxConsumer::new(p, ConsumerConfig::default().batch_size(16))
        .run(src, until_settled(&db, 41, 1))
        .await
        .unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&db).await,
        (41, 1000 + 820)
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'invalid_message'")
            .await,
        1
    );
    assert!(ledger.batches() >= 1, "{} batches", ledger.batches());
    assert_eq!(committed(&name, "ledger"), Offset::Offset(52), "all acked");
    db.finish().await;
}

/// Nothing acked, nothing committed: a member that received records and settled none leaves
/// the group's offset where it was, so the next member receives them all.
#[tokio::test]
async fn unacked_records_are_delivered_again() {
    let name = topic().await;
    publish(&name, &[("message_id", "u-1")], b"{}").await;
    publish(&name, &[("message_id", "u-2")], b"{}").await;
    let mut src = KafkaSource::connect(config(&name, "g")).await.unwrap();
    let held = (
        src.next().await.unwrap().unwrap(),
        src.next().await.unwrap().unwrap(),
    );
    // Deliveries share the group member: it leaves the group when the last one is gone.
    drop(held);
    drop(src);
    assert_eq!(committed(&name, "g"), Offset::Invalid, "nothing committed");
    let mut again = KafkaSource::connect(config(&name, "g")).await.unwrap();
    let d = again.next().await.unwrap().unwrap();
    assert_eq!(d.envelope().unwrap().id().as_str(), "u-1");
    assert_eq!(d.delivery_count(), None, "Kafka keeps no delivery count");
}

/// A wrong address fails at connect, naming the step, instead of retrying silently.
#[tokio::test]
async fn unreachable_brokers_fail_at_connect() {
    let mut c = KafkaConfig::new("127.0.0.1:1", "g", ["t"]).connect_timeout(Duration::from_secs(1));
    c.properties
        .push(("socket.timeout.ms".into(), "1000".into()));
    let err = KafkaSource::connect(c).await.unwrap_err();
    assert!(err.to_string().contains("reach the brokers"), "{err}");
}

/// A consumer process killed with SIGKILL after its commit and before its offset was stored:
/// the restarted member receives the record again and settles it as a duplicate. The ledger
/// shows every effect once.
#[tokio::test]
async fn killed_between_commit_and_ack_applies_once() {
    let test = &inboxed_test::test_name!("killed_between_commit_and_ack_applies_once");
    if let Some(locator) = broker_child_locator() {
        let name = std::env::var("INBOXED_KAFKA_TOPIC").unwrap();
        let src = KafkaSource::connect(config(&name, "ledger")).await.unwrap();
        return broker_child_main::<Pg, _>(&locator, src).await;
    }
    let db = Pg::create().await;
    let name = topic().await;
    for (id, amount) in CRASH_MESSAGES {
        publish(&name, &[("message_id", id)], credit(id, amount).payload()).await;
    }
    killed_between_commit_and_ack(test, &db, &[("INBOXED_KAFKA_TOPIC", name.as_str())]).await;
    db.finish().await;
}

/// Bad input at the wire: a producer outside Rust (`inboxed_test::raw_kafka`, kafka-python with
/// header names sent as raw bytes) puts header names that are not UTF-8 (which rdkafka's safe
/// API panics on), a key header given twice, and bad keys (not UTF-8, NUL, empty, absent, past
/// 512 bytes) and a 1,000,000-byte value (Kafka's default maximum) among 200 valid records. Every valid record is applied once (ledger count and
/// sum), every bad one dead-lettered naming its field, and the group's offset reaches the end.
#[tokio::test]
async fn no_bytes_a_producer_can_send_stop_the_partition() {
    use inboxed_test::raw_amqp::hex;
    use serde_json::json;

    let db = Pg::create().await;
    let name = topic().await;
    let body = |amount: i64| hex(format!(r#"{{"amount": {amount}}}"#).as_bytes());
    let record = |headers: &[(&[u8], &[u8])], amount: i64| {
        let headers: Vec<_> = headers.iter().map(|(n, v)| [hex(n), hex(v)]).collect();
        json!({"headers": headers, "value": body(amount)})
    };
    let big = [b'k'; 513];
    let bad = [
        (
            record(&[(b"message_id", b"m-\xff")], 1_000_000),
            "Kafka message_id header is not valid UTF-8 (bytes m-\\xff)",
        ),
        (
            record(&[(b"message_id", b"m\x00nul")], 1_000_000),
            "NUL byte at offset 1",
        ),
        (record(&[(b"message_id", b"")], 1_000_000), "no message id"),
        (record(&[(b"other", b"x")], 1_000_000), "no message id"),
        (record(&[(b"message_id", &big)], 1_000_000), "513 bytes"),
        (
            record(
                &[(b"message_id", b"twice-1"), (b"message_id", b"twice-2")],
                1_000_000,
            ),
            "header message_id is given more than once",
        ),
        (
            json!({"headers": [[hex(b"message_id"), hex(b"big-body")]], "value": hex(b"\xff\x00garbag"), "value_repeat": 125_000}),
            "expected value at line 1 column 1",
        ),
    ];
    let mut messages = Vec::new();
    let (mut rows, mut sum) = (0_i64, 0_i64);
    let mut extra = bad.iter().map(|(m, _)| m.clone());
    for i in 0..200_i64 {
        if i % 25 == 0
            && let Some(message) = extra.next()
        {
            messages.push(message);
        }
        let id = format!("w-{i}");
        // Header names that are not UTF-8 (and one holding a NUL) beside a valid key, and the
        // key given twice with the same value: records like any other.
        let odd: &[u8] = match i % 3 {
            0 => b"x-\xfe\xff",
            1 => b"x\x00nul",
            _ => b"message_id",
        };
        messages.push(record(
            &[
                (b"message_id", id.as_bytes()),
                (odd, if i % 3 == 2 { id.as_bytes() } else { b"\xff" }),
            ],
            i + 1,
        ));
        rows += 1;
        sum += i + 1;
    }
    messages.extend(extra);
    inboxed_test::raw_kafka::produce(&brokers(), &name, messages).await;

    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let src = KafkaSource::connect(config(&name, "ledger")).await.unwrap();
    let dead = i64::try_from(bad.len()).unwrap();
    InboxConsumer::new(p, ConsumerConfig::default())
        .run(src, until_settled(&db, rows, dead))
        .await
        .unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&db).await,
        (rows, sum),
        "every valid record applied once, no bad one applied"
    );
    let expect: Vec<&str> = bad.iter().map(|(_, e)| *e).collect();
    inboxed_test::wire::assert_dead_letters(&db, bad.len(), &expect).await;
    // 1,000,000 bytes: Kafka's default `message.max.bytes` for a record's value, and
    // librdkafka's own producer limit.
    assert_eq!(
        inboxed_test::wire::dead_letter_payload_len(&db, "big-body").await,
        1_000_000,
        "the body is kept byte for byte"
    );
    let total = i64::try_from(bad.len()).unwrap() + rows;
    for _ in 0..50 {
        if committed(&name, "ledger") == Offset::Offset(total) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        committed(&name, "ledger"),
        Offset::Offset(total),
        "every record acked"
    );
    db.finish().await;
}

/// A record's headers reach the envelope in order, a repeated name each time, a value that is
/// not UTF-8 as its bytes.
#[tokio::test]
async fn the_headers_reach_the_envelope() {
    let name = topic().await;
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "message_id",
            value: Some("h-1"),
        })
        .insert(Header {
            key: "traceparent",
            value: Some(traceparent),
        })
        .insert(Header {
            key: "bin",
            value: Some(&[0xff_u8, 0x00, b'a'][..]),
        })
        .insert(Header {
            key: "bin",
            value: Some("second"),
        });
    let record: FutureRecord<'_, (), [u8]> =
        FutureRecord::to(&name).payload(&b"{}"[..]).headers(headers);
    producer
        .send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    let mut src = KafkaSource::connect(config(&name, "headers"))
        .await
        .unwrap();
    let d = src.next().await.unwrap().unwrap();
    let envelope = d.envelope().unwrap();
    inboxed_test::assert_sent_recently(&envelope);
    let got: Vec<(&str, &[u8])> = envelope.headers().iter().collect();
    assert_eq!(
        got,
        [
            ("message_id", &b"h-1"[..]),
            ("traceparent", traceparent.as_bytes()),
            ("bin", &[0xff, 0x00, b'a'][..]),
            ("bin", &b"second"[..]),
        ]
    );
    d.ack().await.unwrap();
}
