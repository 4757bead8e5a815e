//! `inboxed outbox relay` as a process: committed outbox rows published once each under their
//! outbox ids to RabbitMQ, NATS JetStream, Redis Streams and SQS (with the `sqs` feature), from
//! PostgreSQL and from a SQLite outbox; SIGTERM stops it with exit 0.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use async_nats::jetstream;
use lapin::options::QueueDeleteOptions;
use tokio::process::{Child, Command};

use inboxed_core::outbox::OutgoingMessage;
use inboxed_test::amqp::{depth, queue};
use inboxed_test::nats::create_stream;
use inboxed_test::outbox;
use inboxed_test::{Backend, Pg};

use common::{amqp_url, terminate};

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
