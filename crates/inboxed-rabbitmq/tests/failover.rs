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
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::amqp::{depth, publish_keyed, queue};
use inboxed_test::pipeline::Parts;
use inboxed_test::restart::{MESSAGES, audit_through, ledger_counts, store_on};
use inboxed_test::throwaway::ThrowawayPg;

/// A pool on the primary of the two, following it (probing every 200 ms).
async fn follow(
    primary: &ThrowawayPg,
    standby: &ThrowawayPg,
) -> (sqlx::PgPool, failover::Follower) {
    let both = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    failover::connect(
        &both,
        PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(2)),
        Duration::from_millis(200),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_failover_to_a_synchronous_standby_loses_and_repeats_nothing() {
    let primary = ThrowawayPg::start();
    let _direct = store_on(&primary).await;
    let standby = ThrowawayPg::standby_of(&primary, "replica_a");
    primary.synchronous("replica_a").await;
    let (pool, follower) = follow(&primary, &standby).await;
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

/// What the start-up warning predicts, measured: with an asynchronous standby whose WAL
/// receiver is held (SIGSTOP) while the primary commits 300 more rows, the primary crashes, the
/// receiver is killed (it never writes what it held) and the standby is promoted. The commits
/// the standby never received are gone, and so are their messages: the
/// consumer acknowledged them after each commit, as it must, and the broker let them go. No
/// message is applied twice; the loss is the commits the standby lacked.
#[tokio::test]
async fn a_failover_to_an_asynchronous_standby_loses_what_it_had_not_received() {
    use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor};
    use inboxed_test::{Ledger, Pg};

    let primary = ThrowawayPg::start();
    let _direct = store_on(&primary).await;
    let standby = ThrowawayPg::standby_of(&primary, "replica_a");
    let (pool, follower) = follow(&primary, &standby).await;
    let (channel, name) = queue(&amqp_url()).await;
    publish_keyed(&channel, &name, "a", 0..MESSAGES).await;
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), &name).prefetch(64))
        .await
        .unwrap();
    let processor = Processor::new(
        PgStore::new(pool),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let mut parts = Parts::default();
    let stopping = parts.stopping();
    parts.spawn(async move {
        Consumer::new(processor, ConsumerConfig::default().concurrency(16))
            .run(source, stopping)
            .await
    });
    let rows_on =
        |url: String| async move { ledger_counts(&url).await.map_or(0, |(rows, _)| rows) };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while rows_on(primary.url()).await < MESSAGES / 4 {
        assert!(tokio::time::Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Hold the standby's WAL receiver: the primary commits on, the standby receives nothing.
    let standby_pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&standby.url())
        .await
        .unwrap();
    let receiver: i32 = sqlx::query_scalar("SELECT pid FROM pg_stat_wal_receiver")
        .fetch_one(&standby_pool)
        .await
        .unwrap();
    standby_pool.close().await;
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &receiver.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {receiver}");
    };
    signal("-STOP");
    let held_at = rows_on(primary.url()).await;
    while rows_on(primary.url()).await < held_at + 300 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress while held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    primary.crash();
    let acknowledged = held_at + 300;
    // Killed rather than let go: woken, it would still write what its socket had buffered.
    signal("-KILL");
    standby.promote();
    // The rest of the stream, on the new primary, until nothing moves for 3 s.
    let mut last = (-1, tokio::time::Instant::now());
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream did not settle"
        );
        let now = rows_on(standby.url()).await;
        if now != last.0 {
            last = (now, tokio::time::Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    parts.stop().await;
    let left = depth(&channel, &name).await;
    let (rows, distinct) = ledger_counts(&standby.url()).await.unwrap();
    let lost = MESSAGES - rows - i64::from(left);
    eprintln!(
        "asynchronous failover: {lost} of {MESSAGES} messages lost (their commits were on the \
         old primary only; {held_at} rows had replicated when the receiver was held, at least \
         {acknowledged} were committed when the primary crashed), {left} left in the queue, \
         no message applied twice"
    );
    assert_eq!(rows, distinct, "no message applied twice");
    assert_eq!(follower.primary(), format!("127.0.0.1:{}", standby.port()));
    assert!(
        lost >= 300,
        "the commits the standby never received are lost with their messages: {lost}"
    );
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}
