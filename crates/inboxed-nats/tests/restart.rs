//! A NATS server of the test's own (file storage, a free port, a temporary directory), killed
//! with SIGKILL and restarted in the middle of a 4,000-message stream: the consumer recovers
//! by itself, and a ledger audit finds every message applied exactly once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use async_nats::jetstream;

use inboxed_core::KeySource;
use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_test::nats::{NatsServer, create_stream, publish_restart_messages};
use inboxed_test::restart::audit_through;
use inboxed_test::{Backend, Pg};

#[tokio::test]
async fn server_killed_and_restarted_mid_stream_loses_and_repeats_nothing() {
    let db = Pg::create().await;
    let mut server = NatsServer::start().await;
    let url = server.url();
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    create_stream(&js, "RESTART", "restart.>").await;
    publish_restart_messages(&js, "restart.all", "r").await;
    drop(js);

    let config = NatsConfig::new(&url, "RESTART", "ledger")
        .prefetch(64)
        .ack_wait(Duration::from_secs(3))
        .key(KeySource::MessageIdProperty);
    let source = NatsSource::connect(config).await.unwrap();
    // Mid-stream: kill the server with SIGKILL, keep it down a moment, start it again on the
    // same storage.
    let (at_kill, ()) = audit_through(&db.locator, db.store.clone(), source, || async {
        server.kill().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        server.boot().await;
    })
    .await;
    eprintln!("restart test: {at_kill} rows when the server was killed");
    db.finish().await;
}
