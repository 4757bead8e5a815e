//! The outbox relay through a real RabbitMQ into a real PostgreSQL inbox downstream: rows
//! written by committed transactions are published once each under their outbox id, a re-send
//! is absorbed by the next service's inbox, refused rows go dead without holding up the rest,
//! an unreachable broker uses up no attempts, and rows of one key arrive in insert order with
//! four relays at once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use lapin::options::{BasicGetOptions, QueueDeleteOptions};
use lapin::{Channel, Connection, ConnectionProperties};

use inboxed_core::inbox::ClaimMode;
use inboxed_core::outbox::{
    Confirmation, Outbox, OutboxRelay, OutboxRow, OutgoingMessage, Publisher,
};
use inboxed_core::store::BeginParams;
use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor, Store};
use inboxed_rabbitmq::{RabbitConfig, RabbitPublisher, RabbitPublisherConfig, RabbitSource};
use inboxed_test::amqp::depth;
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::broker_child::until_settled;
use inboxed_test::outbox::{SENT, count, relay_config, relay_until, unmark_first, write};
use inboxed_test::{Backend, Ledger, Pg, TestDb, credit};

async fn queue() -> (Channel, String) {
    inboxed_test::amqp::queue(&amqp_url()).await
}

/// Until `queue` has no message ready, then half a second for the last acks.
async fn until_empty(channel: &Channel, queue: &str) {
    let passive = lapin::options::QueueDeclareOptions {
        passive: true,
        ..lapin::options::QueueDeclareOptions::default()
    };
    for _ in 0..500 {
        let q = channel
            .queue_declare(queue.into(), passive, lapin::types::FieldTable::default())
            .await
            .unwrap();
        if q.message_count() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
}

async fn publisher() -> RabbitPublisher {
    RabbitPublisher::connect(RabbitPublisherConfig::new(amqp_url()))
        .await
        .unwrap()
}

/// 40 credits written by committed transactions (and 5 by one rolled back) reach the queue,
/// are consumed by an inboxed consumer downstream and credited once each; rows "re-sent" as
/// after a crash between the confirmation and the mark arrive again under the same ids and
/// change nothing downstream. A message carries its id, type, headers and bytes unchanged.
#[tokio::test]
async fn committed_rows_are_published_once_under_their_ids_and_resends_are_absorbed() {
    let upstream = Pg::create().await;
    let downstream = Pg::create().await;
    let (channel, name) = queue().await;

    let credits: Vec<OutgoingMessage> = (0..40_i64)
        .map(|i| OutgoingMessage::new(&name, credit(&format!("c-{i}"), i + 1).payload().to_vec()))
        .collect();
    let mut ids = Vec::new();
    for chunk in credits.chunks(8) {
        ids.extend(write(&upstream.store, chunk).await);
    }
    let outbox = Outbox::new(upstream.store.clone());
    let mut tx = upstream.store.begin(&BeginParams::default()).await.unwrap();
    for i in 0..5 {
        let m = OutgoingMessage::new(&name, credit(&format!("r-{i}"), 1000).payload().to_vec());
        outbox.write(&mut tx, &m).await.unwrap();
    }
    tx.rollback().await.unwrap();

    let relay = OutboxRelay::new(upstream.store.clone(), publisher().await, relay_config());
    relay_until(&relay, &upstream.store, SENT, 40).await;
    assert_eq!(
        depth(&channel, &name).await,
        40,
        "one message per committed row"
    );

    let consume =
        async |db: &TestDb<Pg>, until: std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>>| {
            let processor = Processor::new(
                db.store.clone(),
                ConsumerName::new("ledger").unwrap(),
                Ledger::<Pg>::default(),
            );
            let source =
                RabbitSource::connect(RabbitConfig::new(amqp_url(), name.as_str()).prefetch(16))
                    .await
                    .unwrap();
            Consumer::new(processor, ConsumerConfig::default().concurrency(4))
                .run(source, until)
                .await
                .unwrap();
        };
    consume(&downstream, Box::pin(until_settled(&downstream, 40, 0))).await;
    assert_eq!(
        inboxed_test::conformance::ledger_state(&downstream).await,
        (40, 820),
        "each credit once, the rolled-back ones never"
    );

    // As after a relay killed between the broker's confirmation and the mark: the rows are
    // published again, under the ids they were published under before.
    unmark_first(&upstream.store, 10).await;
    relay_until(&relay, &upstream.store, SENT, 40).await;
    let first = channel
        .basic_get(name.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .expect("a re-sent message");
    assert_eq!(
        first
            .delivery
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.as_str()),
        Some(ids[0].as_str()),
        "re-sent under its outbox id"
    );
    consume(&downstream, Box::pin(until_empty(&channel, &name))).await;
    assert_eq!(
        inboxed_test::conformance::ledger_state(&downstream).await,
        (40, 820),
        "the re-sends were settled as duplicates downstream"
    );
    assert_eq!(depth(&channel, &name).await, 0);

    // What a message carries.
    let raw = b"\x00\xff not utf-8".to_vec();
    let written = write(
        &upstream.store,
        &[OutgoingMessage::new(&name, raw.clone())
            .with_type("Charged")
            .with_correlation_id("corr-1")
            .with_header("schema", "v2")],
    )
    .await;
    relay_until(&relay, &upstream.store, SENT, 41).await;
    let got = channel
        .basic_get(name.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .expect("the message");
    let props = &got.delivery.properties;
    assert_eq!(got.delivery.data, raw, "the payload's bytes unchanged");
    assert_eq!(props.message_id().as_ref().unwrap().as_str(), written[0]);
    assert_eq!(props.kind().as_ref().unwrap().as_str(), "Charged");
    assert_eq!(props.correlation_id().as_ref().unwrap().as_str(), "corr-1");
    assert_eq!(props.delivery_mode(), &Some(2), "persistent");
    let header = props
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("schema").cloned());
    assert_eq!(
        header,
        Some(lapin::types::AMQPValue::LongString("v2".into()))
    );
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    upstream.finish().await;
    downstream.finish().await;
}

/// An unroutable message (no such queue; dead after its attempts), one with a header name
/// longer than AMQP's 255 bytes, and one too large for the
/// publisher (dead at once, nothing sent) are dead with the broker's or the publisher's reason,
/// and the rows written after them are published.
#[tokio::test]
async fn refused_rows_go_dead_without_holding_up_the_rest() {
    let db = Pg::create().await;
    let (channel, name) = queue().await;
    let missing = format!("{name}-missing");
    let mut messages = vec![
        OutgoingMessage::new(&missing, b"nowhere".to_vec()),
        OutgoingMessage::new(&name, vec![b'x'; 2_000]),
        OutgoingMessage::new(&name, b"h".to_vec()).with_header("h".repeat(300), "v"),
    ];
    messages.extend((0..10).map(|i| OutgoingMessage::new(&name, format!("m-{i}").into_bytes())));
    write(&db.store, &messages).await;

    let mut publishing = RabbitPublisherConfig::new(amqp_url());
    publishing.max_message_bytes = 1_000;
    let publisher = RabbitPublisher::connect(publishing).await.unwrap();
    let relay = OutboxRelay::new(db.store.clone(), publisher, relay_config().max_attempts(3));
    relay_until(
        &relay,
        &db.store,
        "SELECT count(*) FROM inboxed_outbox_messages WHERE status IN ('sent', 'dead')",
        13,
    )
    .await;
    assert_eq!(count(&db.store, SENT).await, 10);
    // Told apart by their payloads: "nowhere", 2,000 bytes, "h".
    let dead: BTreeMap<String, (i64, String)> = sqlx::query_as::<_, (i32, i32, String)>(
        "SELECT length(payload), attempts, last_error FROM inboxed_outbox_messages \
         WHERE status = 'dead'",
    )
    .fetch_all(db.store.pool())
    .await
    .unwrap()
    .into_iter()
    .map(|(len, a, e)| {
        let which = match len {
            7 => "unroutable",
            2_000 => "large",
            _ => "header",
        };
        (which.to_owned(), (i64::from(a), e))
    })
    .collect();
    let (attempts, error) = &dead["unroutable"];
    assert_eq!(*attempts, 3, "retried, then dead: {error}");
    assert!(
        error.contains("unroutable") && error.contains("312"),
        "{error}"
    );
    let (attempts, error) = &dead["large"];
    assert_eq!(*attempts, 1, "dead at once: {error}");
    assert!(error.contains("payload is 2000 bytes"), "{error}");
    let (attempts, error) = &dead["header"];
    assert_eq!(*attempts, 1, "dead at once: {error}");
    assert!(
        error.contains("header name") && error.contains("300 bytes"),
        "{error}"
    );
    assert_eq!(
        depth(&channel, &name).await,
        10,
        "the large one and the long header name were never sent"
    );
    // A relay that keeps no sent rows deletes the ten, and keeps the three dead ones.
    let keep_none = relay_config().sent_retention(Some(Duration::ZERO));
    let purging = OutboxRelay::new(db.store.clone(), self::publisher().await, keep_none);
    assert_eq!(purging.purge_sent().await.unwrap(), 10);
    let dead = "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'dead'";
    assert_eq!(count(&db.store, dead).await, 3);
    assert_eq!(count(&db.store, SENT).await, 0);
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    db.finish().await;
}

/// With nothing listening where the broker should be, the relay publishes nothing and hands
/// its rows back with their attempts given back: an outage uses up no attempts.
#[tokio::test]
async fn an_unreachable_broker_loses_nothing_and_uses_no_attempts() {
    let db = Pg::create().await;
    write(
        &db.store,
        &(0..5)
            .map(|i| OutgoingMessage::new("anywhere", vec![i]))
            .collect::<Vec<_>>(),
    )
    .await;
    let port = inboxed_test::free_port();
    let mut publishing =
        RabbitPublisherConfig::new(format!("amqp://guest:guest@127.0.0.1:{port}/%2f"));
    publishing.connect_timeout = Duration::from_millis(500);
    let relay = OutboxRelay::new(
        db.store.clone(),
        RabbitPublisher::lazy(publishing),
        relay_config(),
    );
    for _ in 0..3 {
        let report = relay.run_once().await.unwrap();
        assert_eq!((report.claimed, report.handed_back, report.sent), (5, 5, 0));
    }
    assert_eq!(
        count(
            &db.store,
            "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'pending' AND attempts = 0 \
             AND claim_token IS NULL"
        )
        .await,
        5
    );
    db.finish().await;
}

/// Four relays at once over 10 keys of 12 rows each: every key's rows reach the queue in the
/// order they were written.
#[tokio::test]
async fn rows_of_one_key_arrive_in_insert_order_with_four_relays() {
    let db = Pg::create().await;
    let (channel, name) = queue().await;
    let mut messages = Vec::new();
    for seq in 0..12 {
        for key in 0..10 {
            messages.push(
                OutgoingMessage::new(&name, format!("{key}:{seq}").into_bytes())
                    .with_key(format!("k{key}")),
            );
        }
    }
    for chunk in messages.chunks(15) {
        write(&db.store, chunk).await;
    }
    let relays: Vec<_> = (0..4)
        .map(|_| async {
            OutboxRelay::new(
                db.store.clone(),
                publisher().await,
                // Small batches, claimed side by side: without the rule of one row at a time
                // per key, a later batch of a key overtakes an earlier one on another relay.
                relay_config().concurrency(2).batch_size(4),
            )
        })
        .collect();
    let relays = futures_util::future::join_all(relays).await;
    let runs = relays.iter().map(|r| relay_until(r, &db.store, SENT, 120));
    futures_util::future::join_all(runs).await;
    let conn = Connection::connect(&amqp_url(), ConnectionProperties::default())
        .await
        .unwrap();
    let reader = conn.create_channel().await.unwrap();
    let mut next: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..120 {
        let got = reader
            .basic_get(name.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
            .expect("120 messages");
        let body = String::from_utf8(got.delivery.data.clone()).unwrap();
        let (key, seq) = body.split_once(':').unwrap();
        let expected = next.entry(key.to_owned()).or_insert(0);
        assert_eq!(
            seq.parse::<u32>().unwrap(),
            *expected,
            "key {key} out of order"
        );
        *expected += 1;
    }
    assert!(next.values().all(|n| *n == 12));
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    db.finish().await;
}

/// The child's publisher: the process dies right after the broker confirmed its first batch,
/// before the relay can mark a row of it sent.
struct DieAfterConfirm(RabbitPublisher);

impl Publisher for DieAfterConfirm {
    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        let outcomes = self.0.publish(rows).await;
        if outcomes.iter().all(|o| *o == Confirmation::Confirmed) {
            std::process::abort();
        }
        outcomes
    }
}

/// A relay process killed between the broker's confirmation and the mark: its 10 confirmed
/// rows stay unmarked (under a lease: `sending` until it runs out; lock-held: `pending` at once,
/// the batch's record left for the reaper), and are published again under the same ids, which
/// the inbox downstream settles as duplicates: 40 deliveries, 30 credits, each once. In both
/// claim modes.
#[tokio::test]
async fn a_relay_killed_between_confirmation_and_mark_resends_under_the_same_ids() {
    if let Ok(locator) = std::env::var("INBOXED_OUTBOX_CHILD") {
        let store = Pg::attach(&locator).await;
        let mode = match std::env::var("INBOXED_OUTBOX_MODE").as_deref() {
            Ok("lease") => ClaimMode::Lease,
            _ => ClaimMode::LockHeld,
        };
        let config = relay_config()
            .claim_mode(mode)
            .concurrency(1)
            .batch_size(10)
            .lease(Duration::from_secs(1));
        OutboxRelay::new(store, DieAfterConfirm(publisher().await), config)
            .run(std::future::pending::<()>())
            .await
            .unwrap();
        return;
    }
    killed_between_confirmation_and_mark("lease").await;
    killed_between_confirmation_and_mark("lock-held").await;
}

async fn killed_between_confirmation_and_mark(mode: &str) {
    const TEST: &str = "a_relay_killed_between_confirmation_and_mark_resends_under_the_same_ids";
    let upstream = Pg::create().await;
    let downstream = Pg::create().await;
    let (channel, name) = queue().await;
    let credits: Vec<OutgoingMessage> = (0..30_i64)
        .map(|i| OutgoingMessage::new(&name, credit(&format!("k-{i}"), i + 1).payload().to_vec()))
        .collect();
    write(&upstream.store, &credits).await;

    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .arg(inboxed_test::test_name!(TEST))
        .args(["--exact", "--nocapture", "--test-threads=1"])
        .env("INBOXED_OUTBOX_CHILD", &upstream.locator)
        .env("INBOXED_OUTBOX_MODE", mode)
        .env("INBOXED_AMQP_URL", amqp_url())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the child dies within 60 s")
        .unwrap();
    assert!(!status.success(), "the child died: {status}");
    assert_eq!(
        depth(&channel, &name).await,
        10,
        "its first batch was confirmed"
    );
    let unsettled = if mode == "lease" {
        "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sending'"
    } else {
        "SELECT coalesce(sum(cardinality(ids)), 0)::int8 FROM inboxed_outbox_unmarked"
    };
    assert_eq!(
        count(&upstream.store, SENT).await,
        0,
        "{mode}: none of it marked sent"
    );
    assert_eq!(
        count(&upstream.store, unsettled).await,
        10,
        "{mode}: the batch left unsettled"
    );

    let relay = OutboxRelay::new(upstream.store.clone(), publisher().await, relay_config());
    relay_until(&relay, &upstream.store, SENT, 30).await;
    assert_eq!(
        depth(&channel, &name).await,
        40,
        "{mode}: the 10 were published again"
    );
    let processor = Processor::new(
        downstream.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), name.as_str()).prefetch(16))
        .await
        .unwrap();
    Consumer::new(processor, ConsumerConfig::default().concurrency(4))
        .run(source, until_empty(&channel, &name))
        .await
        .unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&downstream).await,
        (30, 465),
        "{mode}: each credit once: the re-sent ones carried their first ids"
    );
    assert_eq!(depth(&channel, &name).await, 0);
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    upstream.finish().await;
    downstream.finish().await;
}
