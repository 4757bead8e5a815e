//! Bad input at the wire, through a real RabbitMQ: a producer in another language
//! (`inboxed_test::raw_amqp`, a Python script that writes AMQP frames byte by byte) puts on a quorum queue what
//! no Rust client would send (short strings that are not UTF-8 in every property, header names
//! that are not UTF-8 at any depth, a header name given twice, a routing key that is not
//! UTF-8, NUL, empty and oversized values, a 10 MiB body, headers of every AMQP type) mixed
//! into a stream of valid messages. The consumer, at the settings the adapter's docs give
//! (prefetch 32, concurrency 32), must keep running: every valid message applied once (ledger
//! count and sum), every bad one dead-lettered with a reason naming its field, the queue empty.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{Channel, ExchangeKind};
use serde_json::{Value, json};

use inboxed_core::{Consumer, ConsumerConfig, KeySource};
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::raw_amqp::{self, hex};
use inboxed_test::wire::{assert_dead_letters, dead_letter_payload_len, drain_and_check_ledger};
use inboxed_test::{Backend, Pg};

/// A long string as it follows its type tag on the wire.
fn long(bytes: &[u8]) -> Vec<u8> {
    [
        &u32::try_from(bytes.len()).unwrap().to_be_bytes()[..],
        bytes,
    ]
    .concat()
}

/// A table entry's bytes: name, tag, value.
fn entry(name: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
    [
        &[u8::try_from(name.len()).unwrap()][..],
        name,
        &[tag],
        value,
    ]
    .concat()
}

/// `[name, tag, value]` as the producer takes a header.
fn header(name: &[u8], tag: char, value: &[u8]) -> Value {
    json!([hex(name), tag.to_string(), hex(value)])
}

fn credit(amount: i64) -> String {
    hex(format!(r#"{{"amount": {amount}}}"#).as_bytes())
}

async fn produce(messages: Vec<Value>) {
    raw_amqp::produce(&amqp_url(), messages).await;
}

async fn try_produce(messages: Vec<Value>) -> std::process::ExitStatus {
    raw_amqp::try_produce(&amqp_url(), messages).await
}

/// A quorum queue, and a topic exchange bound to it with `#`, so that any routing key reaches it.
async fn queue_and_exchange() -> (Channel, String, String) {
    let (channel, name) = inboxed_test::amqp::queue_of_kind(&amqp_url(), true).await;
    let exchange = format!("{name}-x");
    channel
        .exchange_declare(
            exchange.as_str().into(),
            ExchangeKind::Topic,
            ExchangeDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    channel
        .queue_bind(
            name.as_str().into(),
            exchange.as_str().into(),
            "#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    (channel, name, exchange)
}

/// One bad message and the words its dead letter's error must hold.
struct Bad {
    message: Value,
    expect: &'static str,
}

/// Every property a producer can set (less `user_id`, which RabbitMQ checks against the
/// connection's user, and `expiration`, which it parses), each holding bytes that are not
/// UTF-8; header names that are not UTF-8 at the top, in a nested table and in a table inside
/// an array; a name given twice; NUL, empty and absent ids.
fn bad_messages(queue: &str, exchange: &str) -> Vec<Bad> {
    let rk = hex(queue.as_bytes());
    let on_queue = |props: Value, headers: Option<Value>, expect| {
        let mut message = json!({"routing_key": rk, "props": props, "body": credit(1_000_000)});
        if let Some(headers) = headers {
            message["headers"] = headers;
        }
        Bad { message, expect }
    };
    let id = |s: &str| hex(s.as_bytes());
    let mut bad = vec![
        on_queue(
            json!({"message_id": hex(b"m-\xff")}),
            None,
            "message_id property: not valid UTF-8 (bytes m-\\xff)",
        ),
        on_queue(json!({"message_id": hex(b"m\x00nul")}), None, "NUL byte"),
        on_queue(json!({"message_id": ""}), None, "no message id"),
        on_queue(json!({}), None, "no message id"),
    ];
    for property in [
        "content_type",
        "content_encoding",
        "correlation_id",
        "reply_to",
        "type",
        "app_id",
        "cluster_id",
    ] {
        let expect: &'static str = Box::leak(
            format!("{property} property: not valid UTF-8 (bytes \\xc3()").into_boxed_str(),
        );
        bad.push(on_queue(
            json!({"message_id": id(&format!("bad-{property}")), property: hex(b"\xc3\x28")}),
            None,
            expect,
        ));
    }
    let nested = entry(b"in\xfe", b'S', &long(b"v"));
    let in_array = [&b"F"[..], &long(&nested)].concat();
    bad.extend([
        on_queue(
            json!({"message_id": id("bad-name")}),
            Some(json!([header(b"k\xff", 'S', &long(b"v"))])),
            "a header name in headers: not valid UTF-8 (bytes k\\xff)",
        ),
        on_queue(
            json!({"message_id": id("bad-nested")}),
            Some(json!([header(b"x-info", 'F', &long(&nested))])),
            "a header name in header x-info: not valid UTF-8 (bytes in\\xfe)",
        ),
        on_queue(
            json!({"message_id": id("bad-array")}),
            Some(json!([header(b"x-list", 'A', &long(&in_array))])),
            "a header name in header x-list[0]: not valid UTF-8",
        ),
        on_queue(
            json!({"message_id": id("bad-twice")}),
            Some(json!([
                header(b"dup", 'S', &long(b"one")),
                header(b"dup", 'S', &long(b"two"))
            ])),
            "header dup: appears more than once",
        ),
    ]);
    bad.push(Bad {
        message: json!({
            "exchange": exchange,
            "routing_key": hex(b"orders.\xff"),
            "props": {"message_id": id("bad-routing-key")},
            "body": credit(1_000_000),
        }),
        expect: "routing key: not valid UTF-8 (bytes orders.\\xff)",
    });
    bad.push(Bad {
        message: json!({"routing_key": rk, "props": {"message_id": id("bad-big-body")},
                        "body": hex(b"\xff\x00garbag"), "body_repeat": 1_310_720}),
        // The handler's own error: the body is no JSON (the reason is `permanent`).
        expect: "expected value at line 1 column 1",
    });
    bad
}

/// Valid messages a strict client might still trip on: a header of every AMQP type, a long
/// string header holding bytes that are not UTF-8 (long strings are bytes), a 64 KiB header.
fn odd_but_valid(queue: &str) -> Vec<(Value, i64)> {
    let rk = hex(queue.as_bytes());
    let every_type = json!([
        header(b"t", 't', &[1]),
        header(b"b", 'b', &[0xff]),
        header(b"B", 'B', &[7]),
        header(b"s", 's', &[0, 7]),
        header(b"u", 'u', &[0, 7]),
        header(b"I", 'I', &[0, 0, 0, 7]),
        header(b"i", 'i', &[0, 0, 0, 7]),
        header(b"l", 'l', &[0, 0, 0, 0, 0, 0, 0, 7]),
        header(b"L", 'L', &[0, 0, 0, 0, 0, 0, 0, 7]),
        header(b"f", 'f', &1.5_f32.to_be_bytes()),
        header(b"d", 'd', &1.5_f64.to_be_bytes()),
        header(b"D", 'D', &[2, 0, 0, 0, 7]),
        header(b"S", 'S', &long(b"text")),
        header(b"T", 'T', &[0, 0, 0, 0, 0x65, 0, 0, 0]),
        header(b"x", 'x', &long(b"\x00\xffbytes")),
        header(b"V", 'V', &[]),
        header(b"F", 'F', &long(&entry(b"k", b'S', &long(b"v")))),
        header(b"A", 'A', &long(&[b'I', 0, 0, 0, 1, b'V'])),
    ]);
    vec![
        (
            json!({"routing_key": rk, "props": {"message_id": hex(b"odd-types")},
                   "headers": every_type, "body": credit(100_000)}),
            100_000,
        ),
        (
            json!({"routing_key": rk, "props": {"message_id": hex(b"odd-bytes")},
                   "headers": [header(b"raw", 'S', &long(b"\xff\xfe\x00"))],
                   "body": credit(200_000)}),
            200_000,
        ),
        (
            json!({"routing_key": rk, "props": {"message_id": hex(b"odd-large")},
                   "headers": [header(b"large", 'S', &long(&[b'z'; 65_536]))],
                   "body": credit(300_000)}),
            300_000,
        ),
    ]
}

#[tokio::test]
async fn no_bytes_a_producer_can_send_stop_the_queue() {
    let db = Pg::create().await;
    let (channel, name, exchange) = queue_and_exchange().await;
    let bad = bad_messages(&name, &exchange);
    let odd = odd_but_valid(&name);
    let rk = hex(name.as_bytes());
    // 400 valid messages, every tenth published twice; the bad and odd ones among them,
    // the first of them ahead of everything.
    let mut messages = Vec::new();
    let (mut rows, mut sum) = (0_i64, 0_i64);
    let mut extra = bad
        .iter()
        .map(|b| b.message.clone())
        .chain(odd.iter().map(|(m, _)| m.clone()));
    for i in 0..400_i64 {
        if i % 20 == 0
            && let Some(message) = extra.next()
        {
            messages.push(message);
        }
        let valid = json!({"routing_key": rk, "props": {"message_id": hex(format!("w-{i}").as_bytes())},
                           "body": credit(i + 1)});
        if i % 10 == 0 {
            messages.push(valid.clone());
        }
        messages.push(valid);
        rows += 1;
        sum += i + 1;
    }
    messages.extend(extra);
    rows += i64::try_from(odd.len()).unwrap();
    sum += odd.iter().map(|(_, amount)| amount).sum::<i64>();
    produce(messages).await;

    let config = RabbitConfig::new(amqp_url(), name.as_str()).prefetch(32);
    let source = RabbitSource::connect(config).await.unwrap();
    let dead = i64::try_from(bad.len()).unwrap();
    drain_and_check_ledger(&db, source, (rows, sum), dead).await;
    let expect: Vec<&str> = bad.iter().map(|b| b.expect).collect();
    assert_dead_letters(&db, bad.len(), &expect).await;
    let big = dead_letter_payload_len(&db, "bad-big-body").await;
    assert_eq!(
        big,
        10 * 1024 * 1024,
        "the 10 MiB body is kept byte for byte"
    );
    assert_emptied_then_delete(&channel, &name).await;
    db.finish().await;
}

/// A body at RabbitMQ's maximum message size (128 MiB, `max_message_size`'s default since
/// 3.8) that is not JSON reaches the handler and is dead-lettered with every byte kept; one
/// byte more is refused by the broker at publish, and the valid message published after it is
/// applied.
#[tokio::test]
async fn a_body_at_the_brokers_maximum_is_kept_and_one_past_it_is_refused() {
    const MAX: usize = 128 * 1024 * 1024;
    let db = Pg::create().await;
    let (channel, name) = inboxed_test::amqp::queue_of_kind(&amqp_url(), false).await;
    let rk = hex(name.as_bytes());
    let past = json!({"routing_key": rk, "props": {"message_id": hex(b"past-max")},
                      "body": "ff", "body_repeat": MAX + 1});
    let status = try_produce(vec![past]).await;
    assert!(
        !status.success(),
        "RabbitMQ refuses a body past its maximum"
    );
    produce(vec![
        json!({"routing_key": rk, "props": {"message_id": hex(b"at-max")},
               "body": hex(b"\xff\x00garbag"), "body_repeat": MAX / 8}),
        json!({"routing_key": rk, "props": {"message_id": hex(b"after-max")}, "body": credit(5)}),
    ])
    .await;
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), name.as_str()))
        .await
        .unwrap();
    drain_and_check_ledger(&db, source, (1, 5), 1).await;
    let kept = dead_letter_payload_len(&db, "at-max").await;
    assert_eq!(
        kept,
        i64::try_from(MAX).unwrap(),
        "the 128 MiB body is kept byte for byte"
    );
    assert_emptied_then_delete(&channel, &name).await;
    db.finish().await;
}

/// With the key in a header: a long string that is not UTF-8 is reported as such (not as a
/// missing key), a byte array holding UTF-8 is a key like a long string, and a key past the
/// 512-byte limit is refused by its length.
#[tokio::test]
async fn a_header_key_is_judged_by_its_bytes() {
    let db = Pg::create().await;
    let (channel, name) = inboxed_test::amqp::queue_of_kind(&amqp_url(), false).await;
    let rk = hex(name.as_bytes());
    let keyed = |value: Value, amount: i64| json!({"routing_key": rk, "headers": [value], "body": credit(amount)});
    produce(vec![
        keyed(header(b"x-id", 'S', &long(b"h-\xff")), 1_000),
        keyed(header(b"x-id", 'x', &long(b"h-bytes")), 5),
        keyed(header(b"x-id", 'S', &long(&[b'k'; 513])), 1_000),
        keyed(header(b"x-id", 'S', &long(b"h-text")), 7),
        keyed(header(b"x-id", 'I', &[0, 0, 0, 42]), 11),
    ])
    .await;
    let config = RabbitConfig::new(amqp_url(), name.as_str()).key(KeySource::Header("x-id".into()));
    let source = RabbitSource::connect(config).await.unwrap();
    Consumer::new(
        inboxed_test::wire::ledger_processor(&db),
        ConsumerConfig::default(),
    )
    .run(source, inboxed_test::broker_child::until_settled(&db, 3, 2))
    .await
    .unwrap();
    assert_eq!(inboxed_test::conformance::ledger_state(&db).await, (3, 23));
    let keys: Vec<String> = sqlx::query_scalar("SELECT message_id FROM ledger ORDER BY 1")
        .fetch_all(db.store.pool())
        .await
        .unwrap();
    assert_eq!(keys, ["42", "h-bytes", "h-text"]);
    let expect = [
        "header x-id is not valid UTF-8 (bytes h-\\xff)",
        "513 bytes",
    ];
    assert_dead_letters(&db, 2, &expect).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_emptied_then_delete(&channel, &name).await;
    db.finish().await;
}

/// What RabbitMQ (3.10) itself refuses at publish, closing the producer's connection with 541
/// INTERNAL_ERROR, so that no consumer ever receives it: a header of a type it does not know,
/// the flags' continuation bit, a property list cut short or with bytes past its last property.
/// The screen reads these too (its unit tests), for a broker that forwards them.
#[tokio::test]
async fn malformed_property_lists_never_reach_the_queue() {
    let (channel, name) = inboxed_test::amqp::queue_of_kind(&amqp_url(), false).await;
    let rk = hex(name.as_bytes());
    let raw = |props: &[u8]| json!({"routing_key": rk, "raw_props": hex(props), "body": credit(1)});
    let unknown_type = [&[0x20, 0x00][..], &long(&entry(b"k", b'?', &[0]))].concat();
    for (what, props) in [
        ("an unknown header type", unknown_type),
        ("the continuation bit", vec![0x00, 0x81]),
        ("a cut property", vec![0x00, 0x80, 3, b'u', b'1']),
        (
            "bytes past the last property",
            vec![0x00, 0x80, 2, b'u', b'1', 0],
        ),
    ] {
        let status = try_produce(vec![raw(&props)]).await;
        assert!(!status.success(), "RabbitMQ took {what}");
    }
    assert_emptied_then_delete(&channel, &name).await;
}

/// Every delivery of the test's queue was acked (or never entered it); the queue goes.
async fn assert_emptied_then_delete(channel: &lapin::Channel, name: &str) {
    assert_eq!(
        inboxed_test::amqp::depth(channel, name).await,
        0,
        "every delivery acked"
    );
    channel
        .queue_delete(name.into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}
