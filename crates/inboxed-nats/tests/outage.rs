//! A downstream service down for two minutes in the middle of a stream on JetStream, at the
//! library's defaults (`inboxed_test::outage`): the kill switch opens, the consumer's pending
//! acks stay within `max_ack_pending`, no attempt is charged meanwhile (deliveries held past
//! `ack_wait` come again, which charges nothing either), and afterwards every message is
//! applied once; only the poison, which fails on its own, is dead-lettered.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use inboxed_core::KillSwitch;
use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_test::outage::{downstream_outage, stream};
use inboxed_test::{Backend, Pg};

/// As on RabbitMQ: few enough that each message left would fail its attempts in the outage.
const MESSAGES: i64 = 120;

fn nats_url() -> String {
    std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

#[tokio::test]
async fn a_two_minute_downstream_outage_dead_letters_nothing() {
    let db = Pg::create().await;
    let client = async_nats::connect(nats_url())
        .await
        .expect("NATS must be running: scripts/test.sh starts it");
    let js = jetstream::new(client);
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (name, subject) = (
        format!("INBOXED_OUTAGE_{tag}"),
        format!("inboxed.outage.{tag}"),
    );
    inboxed_test::nats::create_stream(&js, &name, &subject).await;
    for message in stream(MESSAGES) {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", message.id().as_str());
        js.publish_with_headers(subject.clone(), headers, message.payload().to_vec().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let config = NatsConfig::new(nats_url(), name.as_str(), "ledger");
    let bound = u32::try_from(config.prefetch * 2).unwrap();
    let src = NatsSource::connect(config).await.unwrap();
    let pending = || {
        let js = js.clone();
        let name = name.clone();
        async move {
            let stream = js.get_stream(&name).await.unwrap();
            let mut consumer: jetstream::consumer::PullConsumer =
                stream.get_consumer("ledger").await.unwrap();
            u32::try_from(consumer.info().await.unwrap().num_ack_pending).unwrap_or(u32::MAX)
        }
    };
    let outage = downstream_outage(
        &db,
        src,
        MESSAGES,
        Duration::from_secs(120),
        KillSwitch::new(),
        pending,
    )
    .await;
    outage
        .assert_consumer_came_through(&db, MESSAGES, bound)
        .await;
    db.finish().await;
}
