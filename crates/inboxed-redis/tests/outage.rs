//! A downstream service down for two minutes in the middle of a stream on Redis Streams, at the
//! library's defaults (`inboxed_test::outage`): the kill switch opens, the group's pending
//! entries stay bounded (what one read took, and what was requeued before the switch opened),
//! no attempt is charged meanwhile, and afterwards every message is applied once; only the
//! poison, which fails on its own, is dead-lettered.

use std::time::Duration;

use inboxed_core::KillSwitch;
use inboxed_redis::{RedisConfig, RedisSource};
use inboxed_test::outage::{downstream_outage, stream};
use inboxed_test::{Backend, Pg};
use redis::AsyncCommands;

/// As on RabbitMQ: few enough that each message left would fail its attempts in the outage.
const MESSAGES: i64 = 120;

fn redis_url() -> String {
    std::env::var("INBOXED_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

#[tokio::test]
async fn a_two_minute_downstream_outage_dead_letters_nothing() {
    let db = Pg::create().await;
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client
        .get_connection_manager()
        .await
        .expect("Redis must be running: scripts/test.sh starts it");
    let name = format!("inboxed-outage-{}", uuid::Uuid::new_v4());
    for message in stream(MESSAGES) {
        let fields: [(&str, &[u8]); 2] = [
            ("message_id", message.id().as_str().as_bytes()),
            ("payload", message.payload()),
        ];
        let _: String = conn.xadd(&name, "*", &fields).await.unwrap();
    }
    let config = RedisConfig::new(redis_url(), name.as_str(), "ledger");
    let bound = u32::try_from(config.prefetch * 2).unwrap();
    let src = RedisSource::connect(config).await.unwrap();
    let pending = || {
        let (mut conn, name) = (conn.clone(), name.clone());
        async move {
            let reply: redis::streams::StreamPendingReply =
                conn.xpending(&name, "ledger").await.unwrap();
            u32::try_from(reply.count()).unwrap_or(u32::MAX)
        }
    };
    let outage = downstream_outage(
        &db,
        src,
        MESSAGES,
        Duration::from_secs(120),
        KillSwitch::new(),
        pending,
    )
    .await;
    outage
        .assert_consumer_came_through(&db, MESSAGES, bound)
        .await;
    let _: () = conn
        .del(&[name.clone(), format!("{name}:ledger:delays")])
        .await
        .unwrap();
    db.finish().await;
}
