//! A NATS server of the test's own (file storage, a free port, a temporary directory), killed
//! with SIGKILL and restarted in the middle of a 10,000-message stream: the consumer recovers
//! by itself, and a ledger audit finds every message applied exactly once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use tokio::process::{Child, Command};

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, KeySource, Processor};
use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_test::{Backend, Ledger, Pg, credit};

const MESSAGES: i64 = 10_000;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_server(port: u16, dir: &Path) -> Child {
    let child = Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("nats-server must be installed: scripts/test.sh installs it");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return child;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nats-server did not start on port {port}");
}

async fn ledger_rows(db: &inboxed_test::TestDb<Pg>) -> i64 {
    db.scalar("SELECT count(*) FROM ledger").await
}

#[tokio::test]
async fn server_killed_and_restarted_mid_stream_loses_and_repeats_nothing() {
    let db = Pg::create().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let mut server = start_server(port, dir.path()).await;

    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    js.create_stream(jetstream::stream::Config {
        name: "RESTART".into(),
        subjects: vec!["restart.>".into()],
        storage: jetstream::stream::StorageType::File,
        ..jetstream::stream::Config::default()
    })
    .await
    .unwrap();
    let mut acks = Vec::new();
    for i in 0..MESSAGES {
        let id = format!("r-{i}");
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.as_str());
        let body = credit(&id, i % 7 + 1).payload().to_vec();
        acks.push(
            js.publish_with_headers("restart.all", headers, body.into())
                .await
                .unwrap(),
        );
        // The client bounds acks in flight: collect them as we go.
        if acks.len() == 256 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    for ack in acks {
        ack.await.unwrap();
    }
    drop(js);
    eprintln!("restart test: published");

    let config = NatsConfig::new(&url, "RESTART", "ledger")
        .prefetch(64)
        .ack_wait(Duration::from_secs(3))
        .key(KeySource::MessageIdProperty);
    let source = NatsSource::connect(config).await.unwrap();
    let processor = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let consuming = tokio::spawn(async move {
        Consumer::new(processor, ConsumerConfig::default().concurrency(16))
            .run(source, async {
                let _ = stopped.await;
            })
            .await
    });

    // Mid-stream: kill the server with SIGKILL, keep it down a moment, start it again on the
    // same storage.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while ledger_rows(&db).await < MESSAGES / 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress before the kill"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("restart test: killing the server");
    server.kill().await.unwrap();
    let _ = server.wait().await;
    let at_kill = ledger_rows(&db).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _server = start_server(port, dir.path()).await;
    eprintln!("restart test: restarted at {at_kill}");

    while ledger_rows(&db).await < MESSAGES {
        assert!(
            tokio::time::Instant::now() < deadline,
            "stuck at {} of {MESSAGES} after the restart (killed at {at_kill})",
            ledger_rows(&db).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let redeliveries of messages whose acks were lost arrive and settle as duplicates.
    tokio::time::sleep(Duration::from_secs(4)).await;
    eprintln!("restart test: all applied; stopping");
    stop.send(()).unwrap();
    consuming.await.unwrap().unwrap();

    let expected: i64 = (0..MESSAGES).map(|i| i % 7 + 1).sum();
    let (rows, distinct, sum): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT message_id), coalesce(sum(amount), 0)::bigint FROM ledger",
    )
    .fetch_one(db.store.pool())
    .await
    .unwrap();
    assert!(at_kill < MESSAGES, "the kill came mid-stream ({at_kill})");
    assert_eq!(
        (rows, distinct, sum),
        (MESSAGES, MESSAGES, expected),
        "ledger audit"
    );
    db.finish().await;
}
