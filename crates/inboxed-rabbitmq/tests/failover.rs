//! A PostgreSQL failover in the middle of 4,000 RabbitMQ messages. A primary and a streaming
//! standby (two clusters of the test's own), the standby synchronous; the consumer's pool
//! follows the primary through a multi-host URL (`inboxed_postgres::failover::connect`). A
//! quarter of the way the primary is crashed and the standby promoted: the pool's connections
//! to the old primary break, the follower points the pool at the new one, the deliveries that
//! failed meanwhile are redelivered, and the ledger audit on the new primary finds every
//! message exactly once.

use std::time::Duration;

use lapin::options::QueueDeleteOptions;
use sqlx::postgres::PgPoolOptions;

use inboxed_postgres::PgStore;
use inboxed_postgres::failover;
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::{publish_keyed, queue};
use inboxed_test::restart::{MESSAGES, audit_through, store_on};
use inboxed_test::throwaway::ThrowawayPg;

fn amqp_url() -> String {
    std::env::var("INBOXED_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

#[tokio::test]
async fn a_failover_to_a_synchronous_standby_loses_and_repeats_nothing() {
    let primary = ThrowawayPg::start();
    let direct = store_on(&primary).await;
    let standby = ThrowawayPg::standby_of(&primary, "replica_a");
    let admin = direct.pool();
    sqlx::query("ALTER SYSTEM SET synchronous_standby_names = 'replica_a'")
        .execute(admin)
        .await
        .unwrap();
    sqlx::query("SELECT pg_reload_conf()")
        .execute(admin)
        .await
        .unwrap();
    let mut synchronous = false;
    for _ in 0..200 {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
        )
        .fetch_one(admin)
        .await
        .unwrap();
        if n == 1 {
            synchronous = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(synchronous, "the standby became synchronous");
    let both = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    let (pool, follower) = failover::connect(
        &both,
        PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(2)),
        Duration::from_millis(200),
    )
    .await
    .unwrap();
    assert_eq!(follower.primary(), format!("127.0.0.1:{}", primary.port()));

    let (channel, name) = queue(&amqp_url()).await;
    publish_keyed(&channel, &name, "f", 0..MESSAGES).await;
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), &name).prefetch(64))
        .await
        .unwrap();
    // The ledger is read on the standby: a hot standby before, the primary after.
    let (before, ()) = audit_through(&standby.url(), PgStore::new(pool), source, || async {
        primary.crash();
        standby.promote();
    })
    .await;
    assert_eq!(
        follower.primary(),
        format!("127.0.0.1:{}", standby.port()),
        "the pool follows the promoted standby"
    );
    eprintln!("failover over RabbitMQ: {before} rows committed before the primary crashed");
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}
