//! Bad input at the wire, through a real NATS JetStream: a producer in another language
//! (`inboxed_test::raw_nats`, a Python script that writes the protocol byte by byte) publishes
//! header blocks no Rust client would send (names and values that are not UTF-8, NUL, a name
//! given twice, a line without a colon, a `Nats-Msg-Id` past 512 bytes) beside valid messages
//! and a large body. The consumer, at prefetch 32 and concurrency 32, must keep running: every
//! valid message applied once (ledger count and sum), every bad one dead-lettered with its field
//! named, nothing left for redelivery.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use async_nats::jetstream;
use serde_json::{Value, json};

use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_test::raw_amqp::hex;
use inboxed_test::raw_nats::{header_block, produce};
use inboxed_test::wire::{assert_dead_letters, dead_letter_payload_len, drain_and_check_ledger};
use inboxed_test::{Backend, Pg};

fn nats_url() -> String {
    std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

fn credit(amount: i64) -> String {
    hex(format!(r#"{{"amount": {amount}}}"#).as_bytes())
}

#[tokio::test]
async fn no_bytes_a_producer_can_send_stall_the_consumer() {
    let db = Pg::create().await;
    let client = async_nats::connect(nats_url())
        .await
        .expect("NATS must be running: scripts/test.sh starts it");
    let js = jetstream::new(client);
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (name, subject) = (format!("INBOXED_WIRE_{tag}"), format!("inboxed.wire.{tag}"));
    inboxed_test::nats::create_stream(&js, &name, &subject).await;

    let with = |lines: &[&[u8]], amount: i64| -> Value {
        json!({"subject": subject, "headers": header_block(lines), "body": credit(amount)})
    };
    let big_id = [&b"Nats-Msg-Id: "[..], &[b'k'; 513]].concat();
    // Each bad message and the words its dead letter's error must hold.
    let bad: Vec<(Value, &str)> = vec![
        (
            with(&[b"Nats-Msg-Id: m-\xff"], 1_000_000),
            "header Nats-Msg-Id: not valid UTF-8 (bytes m-\\xff)",
        ),
        (
            with(&[b"Nats-Msg-Id: n-1", b"X-\xfe: v"], 1_000_000),
            "a header name: not valid UTF-8",
        ),
        (
            with(&[b"Nats-Msg-Id: n-2", b"X-Info: \xff\xfe"], 1_000_000),
            "header X-Info: not valid UTF-8",
        ),
        (
            with(&[b"Nats-Msg-Id: n-3", b"no colon here"], 1_000_000),
            "a header line without a colon",
        ),
        (with(&[b"X-Other: v"], 1_000_000), "no message id"),
        (with(&[&big_id], 1_000_000), "513 bytes"),
        // The server's default limit is 1 MiB for headers and body together.
        (
            json!({"subject": subject, "headers": header_block(&[b"Nats-Msg-Id: big-body"]),
                   "body": hex(b"\xff\x00garbag"), "body_repeat": 131_000}),
            "expected value at line 1 column 1",
        ),
    ];
    let mut messages = Vec::new();
    let (mut rows, mut sum) = (0_i64, 0_i64);
    let mut extra = bad.iter().map(|(m, _)| m.clone());
    for i in 0..300_i64 {
        if i % 40 == 0
            && let Some(message) = extra.next()
        {
            messages.push(message);
        }
        let id = format!("Nats-Msg-Id: w-{i}");
        messages.push(with(&[id.as_bytes()], i + 1));
        rows += 1;
        sum += i + 1;
    }
    messages.extend(extra);
    produce(&nats_url(), messages).await;

    let config = NatsConfig::new(nats_url(), name.as_str(), "ledger")
        .prefetch(32)
        .ack_wait(Duration::from_secs(5));
    let source = NatsSource::connect(config).await.unwrap();
    let dead = i64::try_from(bad.len()).unwrap();
    drain_and_check_ledger(&db, source, (rows, sum), dead).await;
    let expect: Vec<&str> = bad.iter().map(|(_, e)| *e).collect();
    assert_dead_letters(&db, bad.len(), &expect).await;
    let big = dead_letter_payload_len(&db, "big-body").await;
    assert_eq!(big, 131_000 * 8, "the body is kept byte for byte");
    js.delete_stream(&name).await.unwrap();
    db.finish().await;
}
