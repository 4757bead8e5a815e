//! PostgreSQL crashed (`pg_ctl stop -m immediate`) and restarted in the middle of a
//! 4,000-message JetStream stream: transactions cut by the crash roll back, their messages are
//! nak'ed and redelivered, the pool reconnects, and a ledger audit finds every message applied
//! exactly once. The database is a throwaway cluster of the test's own.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use async_nats::jetstream;

use inboxed_core::KeySource;
use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_test::restart::{audit_through_pg_crash, store_on};
use inboxed_test::throwaway::ThrowawayPg;

fn nats_url() -> String {
    std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

#[tokio::test]
async fn postgres_crashed_and_restarted_mid_stream_loses_and_repeats_nothing() {
    let pg = ThrowawayPg::start();
    let store = store_on(&pg).await;
    let js = jetstream::new(async_nats::connect(nats_url()).await.unwrap());
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (name, subject) = (
        format!("INBOXED_PGRESTART_{tag}"),
        format!("inboxed.pgrestart.{tag}"),
    );
    inboxed_test::nats::create_stream(&js, &name, &subject).await;
    inboxed_test::nats::publish_restart_messages(&js, &subject, "p").await;
    let config = NatsConfig::new(nats_url(), &name, "ledger")
        .prefetch(64)
        .ack_wait(Duration::from_secs(5))
        .key(KeySource::MessageIdProperty);
    let source = NatsSource::connect(config).await.unwrap();
    let before = audit_through_pg_crash(&pg, store, source).await;
    eprintln!("pg restart over NATS: {before} rows committed before the crash");
    js.delete_stream(&name).await.unwrap();
}
