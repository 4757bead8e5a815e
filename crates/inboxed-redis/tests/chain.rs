//! One trace through three services A → B → C over a real Redis, each its own process with
//! its own PostgreSQL database, inbox and outbox, exporting its spans over OTLP to a receiver
//! in the test.

use std::time::Duration;

use redis::AsyncCommands as _;

use inboxed_redis::{RedisConfig, RedisPublisher, RedisPublisherConfig, RedisSource};
use inboxed_test::chain::{Service, run_traced, service_main};

const TRACED: &str = "one_trace_runs_from_the_first_service_to_the_last";

fn redis_url() -> String {
    std::env::var("INBOXED_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Each message, started under a root span in the test, is one trace from A's processing to
/// C's, through both outboxes, relays and streams.
#[tokio::test]
async fn one_trace_runs_from_the_first_service_to_the_last() {
    if let Some(service) = Service::from_env() {
        let mut config = RedisConfig::new(redis_url(), service.input.as_str(), "chain");
        config.block = Duration::from_millis(200);
        let source = RedisSource::connect(config).await.expect("consume");
        let publisher = RedisPublisher::connect(RedisPublisherConfig::new(redis_url()))
            .await
            .expect("publish");
        service_main(&service, source, publisher).await;
        return;
    }
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client
        .get_connection_manager()
        .await
        .expect("Redis must be running: scripts/test.sh starts it");
    let tag = uuid::Uuid::new_v4();
    let [a, b, c] = ["a", "b", "c"].map(|s| format!("inboxed-chain-{tag}-{s}"));
    let mut publishing = conn.clone();
    let first = a.clone();
    let tree = run_traced(
        &inboxed_test::test_name!(TRACED),
        [&a, &b, &c],
        [&b, &c],
        |messages| async move {
            for message in messages {
                let mut fields: Vec<(&str, &[u8])> = vec![
                    ("message_id", message.id().as_str().as_bytes()),
                    ("payload", message.payload()),
                ];
                fields.extend(message.headers().iter());
                let _: String = publishing.xadd(&first, "*", &fields).await.unwrap();
            }
        },
    )
    .await;
    eprintln!("one trace through Redis Streams:\n{tree}");
    for stream in [&a, &b, &c] {
        let _: i64 = conn.del(stream).await.unwrap();
    }
}
