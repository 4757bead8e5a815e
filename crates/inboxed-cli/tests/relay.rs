//! `inboxed relay` as a process, between a real RabbitMQ and a real PostgreSQL: every message
//! stored once whatever happens to the relay (SIGKILL mid-stream) or to the database (crashed
//! and restarted mid-stream); nothing acked before its row is committed (the queue ends empty
//! only because every message has its row); keyless messages dead-lettered; metrics served;
//! SIGTERM settles what is in flight and exits 0. A worker then processes the rows once. And
//! through a NATS server SIGKILLed and restarted mid-stream, the relay recovers by itself.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use async_nats::jetstream;
use lapin::options::{BasicPublishOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel};
use sqlx::PgPool;
use tokio::process::{Child, Command};

use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Worker, WorkerConfig};
use inboxed_test::amqp::{publish_keyed, queue};
use inboxed_test::nats::{NatsServer, create_stream, publish_restart_messages};
use inboxed_test::raw_amqp;
use inboxed_test::restart::{MESSAGES as RESTART_MESSAGES, amount, store_on};
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::{Backend, Ledger, Pg};

use common::{amqp_url, terminate};

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
