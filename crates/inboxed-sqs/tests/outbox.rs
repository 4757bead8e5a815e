//! The outbox relay through a real SQS API (the local emulator scripts/test.sh starts) into a
//! real PostgreSQL inbox downstream: messages sent once with the outbox id in the `message_id`
//! attribute and, on a FIFO queue, as the deduplication id (a re-send inside SQS's window is
//! dropped by the queue), refused rows dead naming the field while the rest are published.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::types::QueueAttributeName;

use inboxed_core::outbox::{OutboxRelay, OutgoingMessage, TYPE_HEADER};
use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor};
use inboxed_sqs::{SqsConfig, SqsPublisher, SqsPublisherConfig, SqsSource};
use inboxed_test::broker_child::until_settled;
use inboxed_test::outbox::{
    SENT, dead_after_relaying, relay_config, relay_until, unmark_first, write,
};
use inboxed_test::{Backend, Ledger, Pg, credit};

fn endpoint() -> String {
    std::env::var("INBOXED_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:15000".to_owned())
}

/// A client with static credentials, which the emulator accepts whatever they are.
fn client() -> Client {
    client_at(&endpoint())
}

fn client_at(endpoint: &str) -> Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(inboxed_sqs::https_client())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "inboxed-test"))
        .build();
    Client::from_conf(config)
}

/// A fresh queue (FIFO when `fifo`); its name and URL.
async fn queue(fifo: bool) -> (String, String) {
    let tag = uuid::Uuid::new_v4().simple();
    let name = if fifo {
        format!("inboxed-outbox-{tag}.fifo")
    } else {
        format!("inboxed-outbox-{tag}")
    };
    let mut create = client()
        .create_queue()
        .queue_name(&name)
        .attributes(QueueAttributeName::VisibilityTimeout, "5");
    if fifo {
        create = create.attributes(QueueAttributeName::FifoQueue, "true");
    }
    let created = create
        .send()
        .await
        .expect("an SQS API must be running: scripts/test.sh starts one");
    (name, created.queue_url.unwrap())
}

/// A message of the queue, with its attributes.
async fn receive_one(queue_url: &str) -> aws_sdk_sqs::types::Message {
    client()
        .receive_message()
        .queue_url(queue_url)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap()
        .messages
        .unwrap()
        .remove(0)
}

/// Messages in the queue, visible or in flight.
async fn messages_in(queue_url: &str) -> u32 {
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

/// 30 credits to a FIFO queue (three ordering keys as message groups), the id, type and
/// header as attributes; 10 of them re-sent as after a crash between the answer and the mark
/// are dropped by the queue's deduplication (the outbox id is the deduplication id), and an
/// inboxed consumer downstream credits each once.
#[tokio::test]
async fn committed_rows_are_sent_once_and_resends_are_dropped_by_the_fifo_queue() {
    let upstream = Pg::create().await;
    let downstream = Pg::create().await;
    let (name, url) = queue(true).await;
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
    let publisher = SqsPublisher::with_client(
        client(),
        SqsPublisherConfig::default().queue("ledger.credits", &url),
    )
    .await
    .unwrap();
    let relay = OutboxRelay::new(upstream.store.clone(), publisher, relay_config());
    relay_until(&relay, &upstream.store, SENT, 30).await;
    assert_eq!(messages_in(&url).await, 30);

    unmark_first(&upstream.store, 10).await;
    relay_until(&relay, &upstream.store, SENT, 30).await;
    assert_eq!(
        messages_in(&url).await,
        30,
        "the re-sends fell inside the queue's deduplication window"
    );

    let first = receive_one(&url).await;
    let attributes = first.message_attributes.unwrap();
    let attribute = |n: &str| attributes[n].string_value.clone().unwrap();
    assert_eq!(attribute("message_id"), ids[0], "{name}: the first message");
    assert_eq!(attribute(TYPE_HEADER), "Credit");
    assert_eq!(attribute("schema"), "v1");
    assert_eq!(first.body.unwrap().as_bytes(), credits[0].payload());
    // Back to the queue for the consumer below.
    client()
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(first.receipt_handle.unwrap())
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();

    let processor = Processor::new(
        downstream.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let source =
        SqsSource::with_client(client(), SqsConfig::new(&url).wait(Duration::from_secs(1)))
            .await
            .unwrap();
    Consumer::new(processor, ConsumerConfig::default().concurrency(4))
        .run(source, until_settled(&downstream, 30, 0))
        .await
        .unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&downstream).await,
        (30, 465)
    );
    upstream.finish().await;
    downstream.finish().await;
}

/// A destination that names no queue (retried, then dead with SQS's reason), a payload that
/// is not text, a header SQS cannot name, too many attributes and a body over
/// `max_message_bytes` (dead at once, each naming its field) do not hold up the 12 rows after
/// them, published to a standard queue by name, ten a call.
#[tokio::test]
async fn refused_rows_go_dead_without_holding_up_the_rest() {
    let db = Pg::create().await;
    let (name, url) = queue(false).await;
    let mut many = OutgoingMessage::new(&name, b"m".to_vec());
    for i in 0..10 {
        many = many.with_header(format!("h{i}"), "v");
    }
    let mut messages = vec![
        OutgoingMessage::new(format!("{name}-nowhere"), b"x".to_vec()),
        OutgoingMessage::new(&name, b"\xff\xfe".to_vec()),
        OutgoingMessage::new(&name, b"y".to_vec()).with_header("AWS.trace", "1"),
        many,
        OutgoingMessage::new(&name, vec![b'z'; 2_000]),
    ];
    messages.extend((0..12).map(|i| OutgoingMessage::new(&name, format!("{i}").into_bytes())));
    write(&db.store, &messages).await;
    let publisher = SqsPublisher::with_client(
        client(),
        SqsPublisherConfig::default().max_message_bytes(1_000),
    )
    .await
    .unwrap();
    let relay = OutboxRelay::new(db.store.clone(), publisher, relay_config().max_attempts(2));
    let dead = dead_after_relaying(&relay, &db.store, 17, 12).await;
    assert_eq!(messages_in(&url).await, 12);
    assert_eq!(dead.len(), 5, "{dead:?}");
    assert_eq!(dead[0].0, 2, "retried, then dead: {}", dead[0].1);
    assert!(dead[0].1.contains("destination"), "{}", dead[0].1);
    for (row, field) in [
        (1, "payload: not UTF-8"),
        (2, "AWS.trace"),
        (3, "11 message attributes"),
        (4, "2052 bytes"),
    ] {
        assert_eq!(dead[row].0, 1, "dead at once: {}", dead[row].1);
        assert!(dead[row].1.contains(field), "{field}: {}", dead[row].1);
    }
    db.finish().await;
}

/// Four rows of 100 KB weigh more together than one call may carry (256 KiB): they go in
/// calls of their own, and all four are sent.
#[tokio::test]
async fn rows_heavier_than_a_call_together_are_split_across_calls() {
    let db = Pg::create().await;
    let (name, url) = queue(false).await;
    let messages: Vec<OutgoingMessage> = (0..4_u8)
        .map(|i| OutgoingMessage::new(&name, vec![b'a' + i; 100_000]))
        .collect();
    write(&db.store, &messages).await;
    let publisher = SqsPublisher::with_client(client(), SqsPublisherConfig::default())
        .await
        .unwrap();
    let relay = OutboxRelay::new(db.store.clone(), publisher, relay_config().max_attempts(2));
    let dead = dead_after_relaying(&relay, &db.store, 4, 4).await;
    assert!(dead.is_empty(), "{dead:?}");
    assert_eq!(messages_in(&url).await, 4);
    db.finish().await;
}

/// A wrong endpoint fails at `with_client`, naming the step, instead of in the relay's
/// retries.
#[tokio::test]
async fn an_unreachable_endpoint_fails_at_connect() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = SqsPublisher::with_client(
        client_at(&format!("http://127.0.0.1:{port}")),
        SqsPublisherConfig::default(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("reach SQS"), "{err}");
}

/// SQS carries ten message attributes. A message whose own headers leave room for the
/// `traceparent` alone is still sent, with its traceparent and without its `tracestate` and
/// `baggage`; one whose own headers are too many is dead naming them, as before tracing.
#[tokio::test]
async fn trace_context_rides_in_the_attributes_left_and_never_fails_a_row() {
    let db = Pg::create().await;
    let (name, url) = queue(false).await;
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let trace = inboxed_core::trace::TraceContext::parse(parent)
        .unwrap()
        .with_tracestate("v=1")
        .with_baggage("k=v");
    // The id and eight headers: nine of ten.
    let mut nine = OutgoingMessage::new(&name, b"n".to_vec()).with_trace_context(trace.clone());
    for i in 0..8 {
        nine = nine.with_header(format!("h{i}"), "v");
    }
    write(&db.store, std::slice::from_ref(&nine)).await;
    let publisher = SqsPublisher::with_client(client(), SqsPublisherConfig::default())
        .await
        .unwrap();
    let relay = OutboxRelay::new(db.store.clone(), publisher, relay_config().max_attempts(2));
    let dead = dead_after_relaying(&relay, &db.store, 1, 1).await;
    assert!(dead.is_empty(), "{dead:?}");
    let received = receive_one(&url).await;
    let attributes = received.message_attributes.unwrap();
    assert_eq!(attributes.len(), 10, "{attributes:?}");
    assert_eq!(
        attributes["traceparent"].string_value.as_deref(),
        Some(parent)
    );
    assert!(!attributes.contains_key("tracestate"));
    assert!(!attributes.contains_key("baggage"));
    db.finish().await;
}
