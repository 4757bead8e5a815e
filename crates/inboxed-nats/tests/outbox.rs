//! The outbox relay through a real NATS JetStream into a real PostgreSQL inbox downstream:
//! rows published once under `Nats-Msg-Id` = their outbox id, a re-send inside the stream's
//! duplicate window absorbed by the stream itself, refused rows dead with the field or the
//! server's reason while the rest are published.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use async_nats::jetstream::{self, Context};

use inboxed_core::outbox::{OutboxRelay, OutgoingMessage};
use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor};
use inboxed_nats::{NatsConfig, NatsPublisher, NatsPublisherConfig, NatsSource, TYPE_HEADER};
use inboxed_test::broker_child::until_settled;
use inboxed_test::outbox::{
    SENT, dead_after_relaying, relay_config, relay_until, unmark_first, write,
};
use inboxed_test::{Backend, Ledger, Pg, credit};

fn nats_url() -> String {
    std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

async fn stream() -> (Context, String, String) {
    let client = async_nats::connect(nats_url())
        .await
        .expect("NATS must be running: scripts/test.sh starts it");
    let js = jetstream::new(client);
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (name, subject) = (
        format!("INBOXED_OUTBOX_{tag}"),
        format!("inboxed.outbox.{tag}"),
    );
    inboxed_test::nats::create_stream(&js, &name, &subject).await;
    (js, name, subject)
}

async fn messages_in(js: &Context, stream: &str) -> u64 {
    js.get_stream(stream)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages
}

/// 30 credits published once each (the destination routed to the test's subject); 10 of them
/// "re-sent" as after a crash between the acknowledgement and the mark are dropped by the
/// stream's duplicate window (`Nats-Msg-Id`), and an inboxed consumer downstream credits each
/// once. The id and the type travel as headers.
#[tokio::test]
async fn committed_rows_are_published_once_and_resends_are_absorbed_by_the_stream() {
    let upstream = Pg::create().await;
    let downstream = Pg::create().await;
    let (js, name, subject) = stream().await;
    let credits: Vec<OutgoingMessage> = (0..30_i64)
        .map(|i| {
            OutgoingMessage::new(
                "ledger.credits",
                credit(&format!("c-{i}"), i + 1).payload().to_vec(),
            )
            .with_type("Credit")
        })
        .collect();
    let ids = write(&upstream.store, &credits).await;
    let publisher = NatsPublisher::connect(
        NatsPublisherConfig::new(nats_url()).subject("ledger.credits", &subject),
    )
    .await
    .unwrap();
    let relay = OutboxRelay::new(upstream.store.clone(), publisher, relay_config());
    relay_until(&relay, &upstream.store, SENT, 30).await;
    assert_eq!(messages_in(&js, &name).await, 30);

    unmark_first(&upstream.store, 10).await;
    relay_until(&relay, &upstream.store, SENT, 30).await;
    assert_eq!(
        messages_in(&js, &name).await,
        30,
        "the re-sends fell inside the stream's duplicate window"
    );

    // Every row's id and type travel as headers. The relay publishes a batch's rows
    // concurrently, so the stream's order is not the rows' (CI once found the second row
    // first).
    let stream = js.get_stream(&name).await.unwrap();
    let mut published = Vec::new();
    for sequence in 1..=30 {
        let headers = stream.get_raw_message(sequence).await.unwrap().headers;
        assert_eq!(headers.get(TYPE_HEADER).unwrap().as_str(), "Credit");
        published.push(headers.get("Nats-Msg-Id").unwrap().as_str().to_owned());
    }
    published.sort();
    let mut written = ids.clone();
    written.sort();
    assert_eq!(published, written);

    let processor = Processor::new(
        downstream.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let source = NatsSource::connect(NatsConfig::new(nats_url(), &name, "ledger").prefetch(16))
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
    js.delete_stream(&name).await.unwrap();
    upstream.finish().await;
    downstream.finish().await;
}

/// A subject no stream takes (dead after its attempts, with the server's reason) and a header
/// value holding CR LF (dead at once, naming the header: on the wire it would be a header of
/// its own) do not hold up the rows after them.
#[tokio::test]
async fn refused_rows_go_dead_without_holding_up_the_rest() {
    let db = Pg::create().await;
    let (js, name, subject) = stream().await;
    let mut messages = vec![
        OutgoingMessage::new(format!("{subject}-nowhere"), b"x".to_vec()),
        OutgoingMessage::new(&subject, b"y".to_vec())
            .with_header("x-note", "a\r\nNats-Msg-Id: forged"),
    ];
    messages.extend((0..10).map(|i| OutgoingMessage::new(&subject, vec![i])));
    write(&db.store, &messages).await;
    let publisher = NatsPublisher::connect(NatsPublisherConfig::new(nats_url()))
        .await
        .unwrap();
    let relay = OutboxRelay::new(db.store.clone(), publisher, relay_config().max_attempts(2));
    let dead = dead_after_relaying(&relay, &db.store, 12, 10).await;
    assert_eq!(dead[0].0, 2, "retried, then dead: {}", dead[0].1);
    assert!(dead[0].1.contains("no stream"), "{}", dead[0].1);
    assert_eq!(dead[1].0, 1, "dead at once: {}", dead[1].1);
    assert!(
        dead[1].1.contains("headers") && dead[1].1.contains("CR or LF"),
        "{}",
        dead[1].1
    );
    assert_eq!(messages_in(&js, &name).await, 10);
    js.delete_stream(&name).await.unwrap();
    db.finish().await;
}
