//! PostgreSQL crashed (`pg_ctl stop -m immediate`) and restarted in the middle of 4,000
//! messages on a RabbitMQ queue: transactions cut by the crash roll back, their deliveries are
//! requeued, the pool reconnects, and a ledger audit finds every message applied exactly once.
//! The database is a throwaway cluster of the test's own.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use lapin::options::QueueDeleteOptions;

use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::amqp::{publish_keyed, queue};
use inboxed_test::restart::{MESSAGES, audit_through_pg_crash, store_on};
use inboxed_test::throwaway::ThrowawayPg;

#[tokio::test]
async fn postgres_crashed_and_restarted_mid_stream_loses_and_repeats_nothing() {
    let pg = ThrowawayPg::start();
    let store = store_on(&pg).await;
    let (channel, name) = queue(&amqp_url()).await;
    publish_keyed(&channel, &name, "p", 0..MESSAGES).await;
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), &name).prefetch(64))
        .await
        .unwrap();
    let before = audit_through_pg_crash(&pg, store, source).await;
    eprintln!("pg restart over RabbitMQ: {before} rows committed before the crash");
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}
