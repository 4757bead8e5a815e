//! The outbox relay through a real Redis into a real PostgreSQL inbox downstream: entries
//! added once each with the outbox id in the `message_id` field, a re-send after a crash
//! settled downstream as a duplicate, refused rows dead naming the field or with the server's
//! reason while the rest are published.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use redis::aio::ConnectionManager;
use redis::streams::StreamRangeReply;
use redis::{AsyncCommands, Value};

use inboxed_core::outbox::{OutboxRelay, OutgoingMessage, TYPE_HEADER};
use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor};
use inboxed_redis::{RedisConfig, RedisPublisher, RedisPublisherConfig, RedisSource};
use inboxed_test::broker_child::until_settled;
use inboxed_test::outbox::{
    SENT, dead_after_relaying, relay_config, relay_until, unmark_first, write,
};
use inboxed_test::{Backend, Ledger, Pg, credit};

fn redis_url() -> String {
    std::env::var("INBOXED_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

async fn stream() -> (ConnectionManager, String) {
    let client = redis::Client::open(redis_url()).unwrap();
    let conn = client
        .get_connection_manager()
        .await
        .expect("Redis must be running: scripts/test.sh starts it");
    (conn, format!("inboxed-outbox-{}", uuid::Uuid::new_v4()))
}

/// Every entry of `stream`, oldest first, each as its fields' raw bytes.
async fn entries(conn: &mut ConnectionManager, stream: &str) -> Vec<Vec<(String, Vec<u8>)>> {
    let reply: StreamRangeReply = conn.xrange_all(stream).await.unwrap();
    reply
        .ids
        .into_iter()
        .map(|e| {
            let mut fields: Vec<(String, Vec<u8>)> = e
                .map
                .into_iter()
                .map(|(k, v)| match v {
                    Value::BulkString(b) => (k, b),
                    other => panic!("field {k}: {other:?}"),
                })
                .collect();
            fields.sort();
            fields
        })
        .collect()
}

fn field<'a>(entry: &'a [(String, Vec<u8>)], name: &str) -> &'a [u8] {
    &entry.iter().find(|(k, _)| k == name).unwrap().1
}

/// 30 credits added once each (the destination routed to the test's stream), their payload
/// bytes, type and header as written; 10 of them re-sent as after a crash between the answer
/// and the mark (Redis keeps no ids: 40 entries), and an inboxed consumer downstream credits
/// each once all the same.
#[tokio::test]
async fn committed_rows_are_published_once_and_resends_are_settled_downstream() {
    let upstream = Pg::create().await;
    let downstream = Pg::create().await;
    let (mut conn, name) = stream().await;
    let mut credits: Vec<OutgoingMessage> = (0..30_i64)
        .map(|i| {
            OutgoingMessage::new(
                "ledger.credits",
                credit(&format!("c-{i}"), i + 1).payload().to_vec(),
            )
            .with_type("Credit")
            .with_header("schema", "v1")
        })
        .collect();
    // Bytes that are not text, and a NUL, travel as they are.
    credits.push(OutgoingMessage::new("raw", b"\0\xff\xfe".to_vec()));
    let ids = write(&upstream.store, &credits).await;
    let publisher = RedisPublisher::connect(
        RedisPublisherConfig::new(redis_url())
            .stream("ledger.credits", &name)
            .stream("raw", format!("{name}-raw"))
            .replicas(0),
    )
    .await
    .unwrap();
    let relay = OutboxRelay::new(upstream.store.clone(), publisher, relay_config());
    relay_until(&relay, &upstream.store, SENT, 31).await;
    let added = entries(&mut conn, &name).await;
    assert_eq!(added.len(), 30);
    // Found by its id: rows without a key have no order among themselves, and a relay's
    // batches can reach the stream in either order.
    let first = added
        .iter()
        .find(|e| field(e, "message_id") == ids[0].as_bytes())
        .expect("the first message is on the stream");
    assert_eq!(field(first, TYPE_HEADER), b"Credit");
    assert_eq!(field(first, "schema"), b"v1");
    assert_eq!(field(first, "payload"), credits[0].payload());
    let raw = entries(&mut conn, &format!("{name}-raw")).await;
    assert_eq!(field(&raw[0], "payload"), b"\0\xff\xfe");

    unmark_first(&upstream.store, 10).await;
    relay_until(&relay, &upstream.store, SENT, 31).await;
    assert_eq!(entries(&mut conn, &name).await.len(), 40);

    let processor = Processor::new(
        downstream.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let mut config = RedisConfig::new(redis_url(), &name, "ledger");
    config.block = std::time::Duration::from_millis(200);
    let source = RedisSource::connect(config).await.unwrap();
    Consumer::new(processor, ConsumerConfig::default().concurrency(4))
        .run(source, until_settled(&downstream, 30, 0))
        .await
        .unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&downstream).await,
        (30, 465),
        "each credit applied once, the 10 re-sent entries settled as duplicates"
    );
    let _: () = conn.del(&[&name, &format!("{name}-raw")]).await.unwrap();
    upstream.finish().await;
    downstream.finish().await;
}

/// A key that holds no stream (WRONGTYPE: retried, then dead with the server's reason), a
/// payload over `max_message_bytes` and a header named as the publisher's own `message_id`
/// (dead at once, naming the field) do not hold up the ten rows after them.
#[tokio::test]
async fn refused_rows_go_dead_without_holding_up_the_rest() {
    let db = Pg::create().await;
    let (mut conn, name) = stream().await;
    let wrong = format!("{name}-a-string");
    let _: () = conn.set(&wrong, "not a stream").await.unwrap();
    let mut messages = vec![
        OutgoingMessage::new(&wrong, b"x".to_vec()),
        OutgoingMessage::new(&name, vec![7; 2_000]),
        OutgoingMessage::new(&name, b"y".to_vec()).with_header("message_id", "forged"),
    ];
    messages.extend((0..10).map(|i| OutgoingMessage::new(&name, vec![i])));
    write(&db.store, &messages).await;
    let publisher = RedisPublisher::connect(
        RedisPublisherConfig::new(redis_url())
            .max_message_bytes(1_000)
            .max_len(1_000),
    )
    .await
    .unwrap();
    let relay = OutboxRelay::new(db.store.clone(), publisher, relay_config().max_attempts(2));
    let dead = dead_after_relaying(&relay, &db.store, 13, 10).await;
    assert_eq!(dead.len(), 3, "{dead:?}");
    assert_eq!(dead[0].0, 2, "retried, then dead: {}", dead[0].1);
    assert!(dead[0].1.contains("WRONGTYPE"), "{}", dead[0].1);
    assert_eq!(dead[1].0, 1, "dead at once: {}", dead[1].1);
    assert!(
        dead[1].1.contains("payload") && dead[1].1.contains("2000 bytes"),
        "{}",
        dead[1].1
    );
    assert_eq!(dead[2].0, 1, "dead at once: {}", dead[2].1);
    assert!(
        dead[2].1.contains("headers") && dead[2].1.contains("message_id"),
        "{}",
        dead[2].1
    );
    let added = entries(&mut conn, &name).await;
    assert_eq!(added.len(), 10);
    assert_eq!(field(&added[9], "payload"), [9]);
    let _: () = conn.del(&[&name, &wrong]).await.unwrap();
    db.finish().await;
}

/// A relay that keeps no sent rows (`sent_retention` zero) deletes each row once Redis has
/// it: 20 entries added, the outbox empty.
#[tokio::test]
async fn a_relay_keeping_no_sent_rows_deletes_them_once_confirmed() {
    let db = Pg::create().await;
    let (mut conn, name) = stream().await;
    let messages: Vec<OutgoingMessage> = (0..20_u8)
        .map(|i| OutgoingMessage::new(&name, vec![i]))
        .collect();
    write(&db.store, &messages).await;
    let publisher = RedisPublisher::connect(RedisPublisherConfig::new(redis_url()))
        .await
        .unwrap();
    let config = relay_config().sent_retention(Some(std::time::Duration::ZERO));
    let relay = OutboxRelay::new(db.store.clone(), publisher, config);
    relay_until(
        &relay,
        &db.store,
        "SELECT 20 - count(*) FROM inboxed_outbox_messages",
        20,
    )
    .await;
    assert_eq!(entries(&mut conn, &name).await.len(), 20);
    let _: () = conn.del(&name).await.unwrap();
    db.finish().await;
}

/// A wrong address fails at `connect`, naming the step, instead of in the relay's retries.
#[tokio::test]
async fn an_unreachable_server_fails_at_connect() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = RedisPublisher::connect(RedisPublisherConfig::new(format!(
        "redis://127.0.0.1:{port}"
    )))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("could not connect"), "{err}");
}
