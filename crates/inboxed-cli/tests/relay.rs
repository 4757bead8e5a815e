//! `inboxed relay` as a process, between a real RabbitMQ and a real PostgreSQL: every message
//! stored once whatever happens to the relay (SIGKILL mid-stream) or to the database (crashed
//! and restarted mid-stream); nothing acked before its row is committed (the queue ends empty
//! only because every message has its row); keyless messages dead-lettered; metrics served;
//! SIGTERM settles what is in flight and exits 0. A worker then processes the rows once. And
//! through a NATS server SIGKILLed and restarted mid-stream, the relay recovers by itself.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use async_nats::jetstream;
use lapin::options::{BasicPublishOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel};
use sqlx::PgPool;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Worker, WorkerConfig};
use inboxed_core::outbox::OutgoingMessage;
use inboxed_test::amqp::{publish_keyed, queue};
use inboxed_test::nats::{NatsServer, create_stream, publish_restart_messages};
use inboxed_test::outbox;
use inboxed_test::raw_amqp;
use inboxed_test::restart::{MESSAGES as RESTART_MESSAGES, amount, store_on};
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::{Backend, Ledger, Pg};

fn amqp_url() -> String {
    std::env::var("INBOXED_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// The relay from RabbitMQ queue `queue` into `to`.
fn relay(queue: &str, to: &str, metrics_port: u16) -> Child {
    relay_from(&["--from", &amqp_url(), "--queue", queue], to, metrics_port)
}

/// The relay from the broker `from` names into `to`, as consumer `billing`.
fn relay_from(from: &[&str], to: &str, metrics_port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .arg("relay")
        .args(from)
        .args(["--to", to, "--consumer", "billing", "--prefetch", "50"])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
        .env("INBOXED_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start inboxed relay")
}

/// Stored rows of consumer `billing`, or `None` while the database is down.
async fn rows(pool: &PgPool) -> Option<i64> {
    sqlx::query_scalar(
        "SELECT count(*) FROM inboxed_inbox_messages WHERE consumer_name = 'billing'",
    )
    .fetch_one(pool)
    .await
    .ok()
}

async fn wait_for_rows(pool: &PgPool, at_least: i64) {
    for _ in 0..1200 {
        if rows(pool).await.unwrap_or(0) >= at_least {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "fewer than {at_least} rows after 120 s: {:?}",
        rows(pool).await
    );
}

/// SIGTERM, then the exit status and what the relay printed.
async fn terminate(mut child: Child) -> (bool, String) {
    let pid = child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the relay stops within 30 s of SIGTERM")
        .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    (status.success(), out)
}

/// Messages left in the queue (no consumer holds any once the relay is gone).
async fn depth(channel: &Channel, queue: &str) -> u32 {
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await
        .unwrap()
        .message_count()
}

const MESSAGES: i64 = 2_000;

#[tokio::test]
async fn relay_stores_each_message_once_through_a_kill() {
    let db = Pg::create().await;
    let pool = db.store.pool().clone();
    let (channel, name) = queue(&amqp_url()).await;
    // First in the queue, from a producer outside Rust: a message_id that is not UTF-8, which
    // lapin cannot parse (it stopped the relay's queue before the adapter's screen).
    let unreadable = serde_json::json!({
        "routing_key": raw_amqp::hex(name.as_bytes()),
        "props": {"message_id": raw_amqp::hex(b"r-\xff")},
        "body": raw_amqp::hex(b"{}"),
    });
    raw_amqp::produce(&amqp_url(), vec![unreadable]).await;
    publish_keyed(&channel, &name, "r", 0..MESSAGES).await;
    publish_keyed(&channel, &name, "r", 0..200).await; // producer retries
    channel
        .basic_publish(
            "".into(),
            name.as_str().into(),
            BasicPublishOptions::default(),
            b"{}",
            BasicProperties::default(),
        )
        .await
        .unwrap();

    let mut first = relay(&name, &db.locator, inboxed_test::free_port());
    wait_for_rows(&pool, MESSAGES / 4).await;
    // SIGKILL: whatever it stored but had not acked comes back, and is a duplicate.
    first.kill().await.unwrap();
    let at_kill = rows(&pool).await.unwrap();
    assert!(at_kill < MESSAGES, "killed mid-stream: {at_kill} stored");
    let port = inboxed_test::free_port();
    let second = relay(&name, &db.locator, port);
    wait_for_rows(&pool, MESSAGES).await;
    let mut invalid = 0_i64;
    for _ in 0..100 {
        invalid = sqlx::query_scalar(
            "SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'invalid_message'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if invalid > 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stored = r#"inboxed_receipts_total{consumer="billing",outcome="stored"}"#;
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = common::http_get(&format!("127.0.0.1:{port}"), "/metrics")
            .await
            .1;
        if metrics.contains(stored) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(metrics.contains(stored), "{metrics}");
    let (ok, out) = terminate(second).await;
    assert!(ok && out.contains("relay stopped"), "{out}");
    assert_eq!(
        rows(&pool).await,
        Some(MESSAGES),
        "every message stored, none lost"
    );
    assert_eq!(
        invalid, 2,
        "the keyless and the unreadable message dead-lettered"
    );
    let unreadable: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM inboxed_dead_letters \
         WHERE strpos(error, 'message_id property: not valid UTF-8 (bytes r-\\xff)') > 0",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(unreadable, 1, "its dead letter names the field");
    assert_eq!(depth(&channel, &name).await, 0, "everything acked");

    let worker = Worker::new(
        db.store.clone(),
        ConsumerName::new("billing").unwrap(),
        Ledger::<Pg>::default(),
        WorkerConfig::default().batch_size(500),
    );
    while worker.run_once().await.unwrap().claimed > 0 {}
    let expected: i64 = (0..MESSAGES).map(amount).sum();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&db).await,
        (MESSAGES, expected)
    );
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    db.finish().await;
}

#[tokio::test]
async fn relay_survives_a_database_crash() {
    const MANY: i64 = 4_000;
    let pg = ThrowawayPg::start();
    let pool = store_on(&pg).await.pool().clone();
    let (channel, name) = queue(&amqp_url()).await;
    publish_keyed(&channel, &name, "r", 0..MANY).await;
    let relay = relay(&name, &pg.url(), inboxed_test::free_port());
    wait_for_rows(&pool, MANY / 10).await;
    pg.crash();
    tokio::time::sleep(Duration::from_secs(1)).await;
    pg.restart();
    let mut after_restart = None;
    for _ in 0..300 {
        after_restart = rows(&pool).await;
        if after_restart.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after_restart = after_restart.expect("PostgreSQL answers after its restart");
    assert!(
        after_restart < MANY,
        "the crash came mid-stream: {after_restart} of {MANY} stored when it restarted"
    );
    wait_for_rows(&pool, MANY).await;
    let (ok, out) = terminate(relay).await;
    assert!(ok, "{out}");
    assert_eq!(
        rows(&pool).await,
        Some(MANY),
        "every message stored, none lost"
    );
    assert_eq!(depth(&channel, &name).await, 0, "everything acked");
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

/// The relay from a NATS server of its own, SIGKILLed and started again in the middle of
/// 4,000 messages: the relay recovers by itself, every message gets its row, and the durable
/// consumer ends with nothing pending or unacked.
#[tokio::test]
async fn relay_survives_a_broker_restart() {
    let db = Pg::create().await;
    let pool = db.store.pool().clone();
    let mut server = NatsServer::start().await;
    let js = jetstream::new(async_nats::connect(&server.url()).await.unwrap());
    create_stream(&js, "RELAY", "relay.>").await;
    publish_restart_messages(&js, "relay.all", "n").await;
    // The relay keeps an existing durable consumer's settings: a short ack wait brings back
    // soon the messages whose acks the kill lost.
    js.get_stream("RELAY")
        .await
        .unwrap()
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("billing".to_owned()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(2),
            ..jetstream::consumer::pull::Config::default()
        })
        .await
        .unwrap();
    drop(js);
    let url = server.url();
    let relay = relay_from(
        &["--from", &url, "--stream", "RELAY"],
        &db.locator,
        inboxed_test::free_port(),
    );
    wait_for_rows(&pool, RESTART_MESSAGES / 4).await;
    server.kill().await;
    let at_kill = rows(&pool).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.boot().await;
    assert!(
        at_kill < RESTART_MESSAGES,
        "killed mid-stream: {at_kill} stored"
    );
    wait_for_rows(&pool, RESTART_MESSAGES).await;
    // Messages delivered before the kill whose acks were lost come back after the ack wait
    // and are acked as duplicates.
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    let mut unacked = (u64::MAX, usize::MAX);
    for _ in 0..300 {
        let info = js
            .get_stream("RELAY")
            .await
            .unwrap()
            .consumer_info("billing")
            .await
            .unwrap();
        unacked = (info.num_pending, info.num_ack_pending);
        if unacked == (0, 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(unacked, (0, 0), "every message acked");
    let (ok, out) = terminate(relay).await;
    assert!(ok, "{out}");
    assert_eq!(rows(&pool).await, Some(RESTART_MESSAGES));
    db.finish().await;
}

/// `inboxed outbox relay` as a process: rows written by a committed transaction reach the
/// queue its `--route` names, each once under its outbox id; SIGTERM stops it with exit 0.
#[tokio::test]
async fn outbox_relay_publishes_committed_rows_and_stops_on_sigterm() {
    let db = Pg::create().await;
    let (channel, name) = queue(&amqp_url()).await;
    let messages: Vec<OutgoingMessage> = (0..25_u8)
        .map(|i| OutgoingMessage::new("billing.charged", vec![i]))
        .collect();
    let ids = outbox::write(&db.store, &messages).await;
    let child = outbox_relay(
        &db.locator,
        &amqp_url(),
        &[&format!("billing.charged=/{name}")],
        &[],
    );
    until_sent(&db.store, 25).await;
    let (ok, out) = terminate(child).await;
    assert!(ok, "exit 0 after SIGTERM: {out}");
    assert!(out.contains("outbox relay stopped"), "{out}");
    assert_eq!(depth(&channel, &name).await, 25, "each row once");
    let first = channel
        .basic_get(
            name.as_str().into(),
            lapin::options::BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap()
        .expect("a message");
    assert_eq!(
        first
            .delivery
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.as_str()),
        Some(ids[0].as_str())
    );
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    db.finish().await;
}

/// `inboxed outbox relay --broker nats://…`: the route names the subject; the rows reach the
/// stream once each under `Nats-Msg-Id` = their outbox id.
#[tokio::test]
async fn outbox_relay_publishes_to_nats_jetstream() {
    let nats_url =
        std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let db = Pg::create().await;
    let js = jetstream::new(async_nats::connect(&nats_url).await.unwrap());
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (stream, subject) = (
        format!("INBOXED_CLI_OUTBOX_{tag}"),
        format!("cli.outbox.{tag}"),
    );
    create_stream(&js, &stream, &subject).await;
    let messages: Vec<OutgoingMessage> = (0..5_u8)
        .map(|i| OutgoingMessage::new("billing.charged", vec![i]))
        .collect();
    let ids = outbox::write(&db.store, &messages).await;
    let child = outbox_relay(
        &db.locator,
        &nats_url,
        &[&format!("billing.charged={subject}")],
        &[],
    );
    until_sent(&db.store, 5).await;
    let (ok, out) = terminate(child).await;
    assert!(ok, "exit 0 after SIGTERM: {out}");
    let mut s = js.get_stream(&stream).await.unwrap();
    assert_eq!(s.info().await.unwrap().state.messages, 5);
    let first = s.get_raw_message(1).await.unwrap();
    assert_eq!(first.headers.get("Nats-Msg-Id").unwrap().as_str(), ids[0]);
    js.delete_stream(&stream).await.unwrap();
    db.finish().await;
}

/// `inboxed outbox relay --broker redis://…`: the route names the stream; each row is one
/// entry, its outbox id in the `message_id` field and its bytes in `payload`.
#[tokio::test]
async fn outbox_relay_publishes_to_redis_streams() {
    use redis::AsyncCommands;
    let redis_url =
        std::env::var("INBOXED_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let db = Pg::create().await;
    let stream = format!("cli-outbox-{}", uuid::Uuid::new_v4());
    let messages: Vec<OutgoingMessage> = (0..5_u8)
        .map(|i| OutgoingMessage::new("billing.charged", vec![i, 0xff]))
        .collect();
    let ids = outbox::write(&db.store, &messages).await;
    let child = outbox_relay(
        &db.locator,
        &redis_url,
        &[&format!("billing.charged={stream}")],
        &[],
    );
    until_sent(&db.store, 5).await;
    let (ok, out) = terminate(child).await;
    assert!(ok, "exit 0 after SIGTERM: {out}");
    let mut conn = redis::Client::open(redis_url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let entries: redis::streams::StreamRangeReply = conn.xrange_all(&stream).await.unwrap();
    assert_eq!(entries.ids.len(), 5);
    let first = &entries.ids[0].map;
    let bytes = |name: &str| match &first[name] {
        redis::Value::BulkString(b) => b.clone(),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(bytes("message_id"), ids[0].as_bytes());
    assert_eq!(bytes("payload"), [0, 0xff]);
    let _: () = conn.del(&stream).await.unwrap();
    db.finish().await;
}

/// `inboxed outbox relay` over a SQLite outbox (no notifications: the relay polls), to Redis:
/// rows committed by another connection while it runs are published too.
#[tokio::test]
async fn outbox_relay_publishes_from_sqlite() {
    use inboxed_core::Store;
    use inboxed_core::outbox::Outbox;
    use inboxed_core::store::BeginParams;
    use redis::AsyncCommands;

    let redis_url =
        std::env::var("INBOXED_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let db = inboxed_test::Lite::create().await;
    let stream = format!("cli-outbox-lite-{}", uuid::Uuid::new_v4());
    let write = |n: u8| {
        let store = db.store.clone();
        let stream = stream.clone();
        async move {
            let outbox = Outbox::new(store.clone());
            let mut tx = store.begin(&BeginParams::default()).await.unwrap();
            let messages: Vec<OutgoingMessage> = (0..n)
                .map(|i| OutgoingMessage::new(stream.as_str(), vec![i]))
                .collect();
            outbox.write_many(&mut tx, &messages).await.unwrap();
            tx.commit().await.unwrap();
        }
    };
    write(5).await;
    let url = format!("sqlite://{}", db.locator);
    let child = outbox_relay(&url, &redis_url, &[], &[]);
    let sent = |want: i64| {
        let store = db.store.clone();
        async move {
            for _ in 0..300 {
                let n: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sent'",
                )
                .fetch_one(store.pool())
                .await
                .unwrap();
                if n == want {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("{want} rows were not sent in 30 s");
        }
    };
    sent(5).await;
    write(3).await;
    sent(8).await;
    let (ok, out) = terminate(child).await;
    assert!(ok, "exit 0 after SIGTERM: {out}");
    let mut conn = redis::Client::open(redis_url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let len: usize = conn.xlen(&stream).await.unwrap();
    assert_eq!(len, 8);
    let _: () = conn.del(&stream).await.unwrap();
}

/// `inboxed outbox relay --broker sqs+http://…` (built with the `sqs` feature): the route
/// names the queue; the rows land once each with the outbox id as the `message_id` attribute.
#[cfg(feature = "sqs")]
#[tokio::test]
async fn outbox_relay_publishes_to_sqs() {
    use inboxed_sqs::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    let endpoint = std::env::var("INBOXED_SQS_ENDPOINT")
        .unwrap_or_else(|_| "http://127.0.0.1:15000".to_owned());
    let client = inboxed_sqs::aws_sdk_sqs::Client::from_conf(
        inboxed_sqs::aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(inboxed_sqs::https_client())
            .endpoint_url(&endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "inboxed-test"))
            .build(),
    );
    let name = format!("cli-outbox-{}", uuid::Uuid::new_v4().simple());
    let url = client
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .expect("an SQS API must be running: scripts/test.sh starts one")
        .queue_url
        .unwrap();
    let db = Pg::create().await;
    let messages: Vec<OutgoingMessage> = (0..12_u8)
        .map(|i| OutgoingMessage::new("billing.charged", format!("charge {i}").into_bytes()))
        .collect();
    let ids = outbox::write(&db.store, &messages).await;
    let child = outbox_relay(
        &db.locator,
        &format!("sqs+{endpoint}"),
        &[&format!("billing.charged={name}")],
        // The SDK's default chain reads these first: no other source is asked.
        &[
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ],
    );
    until_sent(&db.store, 12).await;
    let (ok, out) = terminate(child).await;
    assert!(ok, "exit 0 after SIGTERM: {out}");
    let mut seen = Vec::new();
    for _ in 0..10 {
        let got = client
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        for m in got.messages.unwrap_or_default() {
            let attributes = m.message_attributes.unwrap();
            seen.push(attributes["message_id"].string_value.clone().unwrap());
        }
        if seen.len() >= 12 {
            break;
        }
    }
    seen.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(seen, want, "each row once, under its outbox id");
    db.finish().await;
}

/// `inboxed outbox relay` on `database` to `broker`, with `routes` (`DESTINATION=TARGET`) and
/// `env` added, its standard output piped.
fn outbox_relay(database: &str, broker: &str, routes: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inboxed"));
    cmd.args(["outbox", "relay", "--database-url", database])
        .args(["--broker", broker])
        .env("INBOXED_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    for route in routes {
        cmd.args(["--route", route]);
    }
    cmd.spawn().expect("start inboxed outbox relay")
}

/// Until `want` outbox rows are marked sent (30 s at most: the assertions after it fail then).
async fn until_sent(store: &inboxed_postgres::PgStore, want: i64) {
    for _ in 0..300 {
        if outbox::count(store, outbox::SENT).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
