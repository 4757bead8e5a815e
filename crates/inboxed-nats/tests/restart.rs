//! A NATS server of the test's own (file storage, a free port, a temporary directory), killed
//! with SIGKILL and restarted in the middle of a 10,000-message stream: the consumer recovers
//! by itself, and a ledger audit finds every message applied exactly once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use async_nats::jetstream;
use tokio::process::{Child, Command};

use inboxed_core::KeySource;
use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_test::restart::audit_through;
use inboxed_test::{Backend, Pg};

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

#[tokio::test]
async fn server_killed_and_restarted_mid_stream_loses_and_repeats_nothing() {
    let db = Pg::create().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let mut server = start_server(port, dir.path()).await;
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    common::create_stream(&js, "RESTART", "restart.>").await;
    common::publish_restart_messages(&js, "restart.all", "r").await;
    drop(js);

    let config = NatsConfig::new(&url, "RESTART", "ledger")
        .prefetch(64)
        .ack_wait(Duration::from_secs(3))
        .key(KeySource::MessageIdProperty);
    let source = NatsSource::connect(config).await.unwrap();
    // Mid-stream: kill the server with SIGKILL, keep it down a moment, start it again on the
    // same storage (the restarted server lives until the audit is done).
    let (at_kill, _restarted) = audit_through(&db.locator, db.store.clone(), source, || async {
        server.kill().await.unwrap();
        let _ = server.wait().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        start_server(port, dir.path()).await
    })
    .await;
    eprintln!("restart test: {at_kill} rows when the server was killed");
    db.finish().await;
}
