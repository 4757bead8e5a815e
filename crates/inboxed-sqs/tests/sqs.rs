//! The SQS adapter against a real SQS API (`INBOXED_SQS_ENDPOINT`, default the local emulator
//! on port 15000 that scripts/test.sh starts) and a real PostgreSQL: keys from message
//! attributes, dead letters of keyless messages, receive counts, visibility, redrive, and a
//! consumer process killed with SIGKILL between its commit and its delete.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName};

use inboxed_core::{
    Consumer, ConsumerConfig, ConsumerName, Delivery, DeliverySource, KeySource, Outcome, Processor,
};
use inboxed_sqs::{SqsConfig, SqsSource};
use inboxed_test::broker_child::{
    CRASH_MESSAGES, broker_child_locator, broker_child_main, killed_between_commit_and_ack,
    settle_acked, until_settled,
};
use inboxed_test::conformance::ledger_state as ledger;
use inboxed_test::{Backend, Ledger, Pg, credit};

fn endpoint() -> String {
    std::env::var("INBOXED_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:15000".to_owned())
}

/// A client with static credentials, which the emulator accepts whatever they are.
pub(crate) fn client() -> Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(inboxed_sqs::https_client())
        .endpoint_url(endpoint())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "inboxed-test"))
        .build();
    Client::from_conf(config)
}

/// A fresh queue whose messages come back 2 s after a receive that did not delete them, with
/// extra attributes; returns its URL.
async fn queue(extra: &[(QueueAttributeName, String)]) -> String {
    let mut create = client()
        .create_queue()
        .queue_name(format!("inboxed-test-{}", uuid::Uuid::new_v4()))
        .attributes(QueueAttributeName::VisibilityTimeout, "2");
    for (name, value) in extra {
        create = create.attributes(name.clone(), value);
    }
    let created = create
        .send()
        .await
        .expect("an SQS API must be running: scripts/test.sh starts one");
    created.queue_url.unwrap()
}

async fn send(queue_url: &str, id: Option<&str>, body: &[u8]) {
    let mut send = client()
        .send_message()
        .queue_url(queue_url)
        .message_body(String::from_utf8(body.to_vec()).unwrap());
    if let Some(id) = id {
        let value = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(id)
            .build()
            .unwrap();
        send = send.message_attributes("message_id", value);
    }
    send.send().await.unwrap();
}

/// Messages in the queue, visible or in flight.
async fn remaining(queue_url: &str) -> u32 {
    let attributes = client()
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ]
    .iter()
    .map(|name| attributes[name].parse::<u32>().unwrap())
    .sum()
}

async fn source(queue_url: &str) -> SqsSource {
    let config = SqsConfig::new(queue_url).wait(Duration::from_secs(1));
    SqsSource::with_client(client(), config).await.unwrap()
}

/// The consumer loop in batches of up to 25 over 60 messages, 12 of them sent twice and one
/// without a key: every effect lands once, the keyless one is dead-lettered, and the batches'
/// `DeleteMessageBatch` calls (ten entries each) leave the queue empty.
#[tokio::test]
async fn batches_delete_with_delete_message_batch() {
    let db = Pg::create().await;
    let url = queue(&[]).await;
    for i in 0..60_i64 {
        let id = format!("qb-{i}");
        let body = credit(&id, i + 1).payload().to_vec();
        send(&url, Some(&id), &body).await;
        if i % 5 == 0 {
            send(&url, Some(&id), &body).await;
        }
    }
    send(&url, None, b"{}").await;
    let ledger_handler = Ledger::<Pg>::default();
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        ledger_handler.clone(),
    );
    let src = source(&url).await;
    Consumer::new(p, ConsumerConfig::default().concurrency(2).batch_size(25))
        .run(src, until_settled(&db, 60, 1))
        .await
        .unwrap();
    assert_eq!(ledger(&db).await, (60, 1830));
    assert!(
        ledger_handler.batches() >= 3,
        "{}",
        ledger_handler.batches()
    );
    assert_eq!(remaining(&url).await, 0, "every message deleted");
    db.finish().await;
}

/// A duplicate (same `message_id` attribute) is processed once and both messages are deleted;
/// a message without one is dead-lettered and deleted, never processed. A JSON-field key works
/// too.
#[tokio::test]
async fn duplicates_and_keyless_messages_are_deleted() {
    let db = Pg::create().await;
    let url = queue(&[]).await;
    let body = credit("q-1", 7).payload().to_vec();
    send(&url, Some("q-1"), &body).await;
    send(&url, Some("q-1"), &body).await;
    send(&url, None, &body).await;
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let mut src = source(&url).await;
    let outcomes = settle_acked(&p, &mut src, 3).await;
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    assert_eq!(count(|o| *o == Outcome::Processed), 1, "{outcomes:?}");
    assert_eq!(count(|o| *o == Outcome::Duplicate), 1, "{outcomes:?}");
    assert_eq!(
        count(|o| matches!(o, Outcome::DeadLettered { .. })),
        1,
        "{outcomes:?}"
    );
    assert_eq!(ledger(&db).await, (1, 7));
    assert_eq!(remaining(&url).await, 0, "every message deleted");

    send(&url, None, br#"{"order":{"id":"o-4"}}"#).await;
    let by_field = SqsConfig::new(&url).key(KeySource::JsonField("/order/id".into()));
    let mut by_field = SqsSource::with_client(client(), by_field).await.unwrap();
    let d = by_field.next().await.unwrap().unwrap();
    assert_eq!(d.envelope().unwrap().id().as_str(), "o-4");
    db.finish().await;
}

/// A requeued message comes back with its receive count; one whose visibility was extended
/// stays hidden past the queue's timeout.
#[tokio::test]
async fn requeue_counts_and_extended_visibility() {
    let url = queue(&[]).await;
    send(&url, Some("r-1"), b"{}").await;
    let mut src = source(&url).await;
    let d = src.next().await.unwrap().unwrap();
    assert_eq!(d.delivery_count(), Some(1));
    d.requeue(None).await.unwrap();
    let d = src.next().await.unwrap().unwrap();
    assert_eq!(d.envelope().unwrap().id().as_str(), "r-1");
    assert_eq!(d.delivery_count(), Some(2));

    d.extend_deadline(Duration::from_secs(30)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(remaining(&url).await, 1);
    let mut other = source(&url).await;
    let none = tokio::time::timeout(Duration::from_secs(3), other.next()).await;
    assert!(none.is_err(), "still hidden after the queue's 2 s");
    d.ack().await.unwrap();
    assert_eq!(remaining(&url).await, 0);
}

/// A rejected message goes back to the queue, whose redrive policy moves it to the
/// dead-letter queue once received `maxReceiveCount` times.
#[tokio::test]
async fn rejected_messages_follow_the_redrive_policy() {
    let dlq = queue(&[]).await;
    let arn = client()
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    let policy = format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"1"}}"#);
    let url = queue(&[(QueueAttributeName::RedrivePolicy, policy)]).await;
    send(&url, Some("p-1"), b"{}").await;
    let mut src = source(&url).await;
    src.next().await.unwrap().unwrap().reject().await.unwrap();
    let mut from_dlq = source(&dlq).await;
    let mut main = source(&url).await;
    let none = tokio::time::timeout(Duration::from_secs(3), main.next()).await;
    assert!(none.is_err(), "no longer in the main queue");
    let d = from_dlq.next().await.unwrap().unwrap();
    assert_eq!(d.envelope().unwrap().id().as_str(), "p-1");
}

/// A wrong queue URL fails at start, naming the step.
#[tokio::test]
async fn a_missing_queue_fails_at_start() {
    let config = SqsConfig::new(format!("{}/000000000000/no-such-queue", endpoint()));
    let err = SqsSource::with_client(client(), config).await.unwrap_err();
    assert!(err.to_string().contains("find the queue"), "{err}");
}

/// A consumer process killed with SIGKILL after its commit and before its delete: the message
/// comes back when its visibility runs out, and the restarted consumer settles it as a
/// duplicate. The ledger shows every effect once.
#[tokio::test]
async fn killed_between_commit_and_ack_applies_once() {
    let test = &inboxed_test::test_name!("killed_between_commit_and_ack_applies_once");
    if let Some(locator) = broker_child_locator() {
        let url = std::env::var("INBOXED_SQS_QUEUE").unwrap();
        let config = SqsConfig::new(url).wait(Duration::from_secs(1)).prefetch(1);
        let src = SqsSource::with_client(client(), config).await.unwrap();
        return broker_child_main::<Pg, _>(&locator, src).await;
    }
    let db = Pg::create().await;
    let url = queue(&[]).await;
    for (id, amount) in CRASH_MESSAGES {
        send(&url, Some(id), credit(id, amount).payload()).await;
    }
    killed_between_commit_and_ack(test, &db, &[("INBOXED_SQS_QUEUE", url.as_str())]).await;
    assert_eq!(remaining(&url).await, 0, "all deleted");
    db.finish().await;
}

/// Bad input at the wire: what any SDK can put in an SQS message beside valid ones, with the key
/// in the attribute `x-id`. A Binary attribute holding UTF-8 is a key like a String one; one
/// holding bytes that are not UTF-8 is dead-lettered as such (it used to read as no key); a key
/// past 512 bytes and a missing one are dead-lettered; a 256 KiB body (SQS's limit) that is not
/// JSON reaches the handler and is dead-lettered with its body kept. Every valid message is
/// applied once and the queue ends empty.
#[tokio::test]
async fn attributes_of_every_kind_settle_or_dead_letter() {
    let db = Pg::create().await;
    let url = queue(&[]).await;
    let send_with = |value: MessageAttributeValue, body: String| {
        let url = url.clone();
        async move {
            client()
                .send_message()
                .queue_url(url)
                .message_body(body)
                .message_attributes("x-id", value)
                .send()
                .await
                .unwrap();
        }
    };
    let text = |id: &str| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(id)
            .build()
            .unwrap()
    };
    let binary = |bytes: &[u8]| {
        MessageAttributeValue::builder()
            .data_type("Binary")
            .binary_value(aws_sdk_sqs::primitives::Blob::new(bytes))
            .build()
            .unwrap()
    };
    let credit = |amount: i64| format!(r#"{{"amount": {amount}}}"#);
    for i in 0..20_i64 {
        send_with(text(&format!("sq-{i}")), credit(i + 1)).await;
    }
    send_with(binary(b"sq-binary"), credit(100)).await;
    send_with(binary(b"sq-\xff"), credit(1_000_000)).await;
    send_with(text(&"k".repeat(513)), credit(1_000_000)).await;
    send_with(text("sq-big"), "x".repeat(262_144 - 100)).await;
    send(&url, None, credit(1_000_000).as_bytes()).await;
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let config = SqsConfig::new(&url)
        .wait(Duration::from_secs(1))
        .key(KeySource::Header("x-id".into()));
    let src = SqsSource::with_client(client(), config).await.unwrap();
    Consumer::new(p, ConsumerConfig::default().concurrency(4))
        .run(src, until_settled(&db, 21, 4))
        .await
        .unwrap();
    assert_eq!(ledger(&db).await, (21, 310));
    let expect = [
        "header x-id is not valid UTF-8 (bytes sq-\\xff)",
        "513 bytes",
        "the delivery carries no message id",
        "expected value at line 1 column 1",
    ];
    inboxed_test::wire::assert_dead_letters(&db, 4, &expect).await;
    let big = inboxed_test::wire::dead_letter_payload_len(&db, "sq-big").await;
    assert_eq!(big, 262_144 - 100, "the body kept byte for byte");
    // A message whose 2 s visibility ran out while a loaded machine processed it comes back
    // (or its delete raced the redelivery): a consumer run until the queue is empty settles
    // such a copy as a duplicate, and nothing is applied twice.
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let config = SqsConfig::new(&url)
        .wait(Duration::from_secs(1))
        .key(KeySource::Header("x-id".into()));
    let src = SqsSource::with_client(client(), config).await.unwrap();
    let empty = async {
        for _ in 0..150 {
            if remaining(&url).await == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    Consumer::new(p, ConsumerConfig::default())
        .run(src, empty)
        .await
        .unwrap();
    assert_eq!(remaining(&url).await, 0, "every message deleted");
    assert_eq!(ledger(&db).await, (21, 310), "and none applied twice");
    db.finish().await;
}

/// The message attributes reach the envelope as its headers, sorted by name: a string as its
/// text, a binary attribute as its bytes.
#[tokio::test]
async fn the_attributes_reach_the_envelope_as_headers() {
    let url = queue(&[]).await;
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let text = |v: &str| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .unwrap()
    };
    let binary = MessageAttributeValue::builder()
        .data_type("Binary")
        .binary_value(aws_sdk_sqs::primitives::Blob::new(vec![0xff, 0x00, b'a']))
        .build()
        .unwrap();
    client()
        .send_message()
        .queue_url(&url)
        .message_body("{}")
        .message_attributes("message_id", text("h-1"))
        .message_attributes("traceparent", text(traceparent))
        .message_attributes("bin", binary)
        .send()
        .await
        .unwrap();
    let mut src = source(&url).await;
    let d = src.next().await.unwrap().unwrap();
    let envelope = d.envelope().unwrap();
    inboxed_test::assert_sent_recently(&envelope);
    let got: Vec<(&str, &[u8])> = envelope.headers().iter().collect();
    assert_eq!(
        got,
        [
            ("bin", &[0xff, 0x00, b'a'][..]),
            ("message_id", &b"h-1"[..]),
            ("traceparent", traceparent.as_bytes()),
        ]
    );
    d.ack().await.unwrap();
}
