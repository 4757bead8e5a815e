//! Store-then-process through a PostgreSQL failover, with every part at its defaults: a relay
//! stores 4,000 RabbitMQ messages into the inbox table, two workers (notifications and
//! liveness on) process them, crediting the ledger and writing each on through the outbox in
//! the same transaction, and an outbox relay publishes those to a second queue, all on one
//! `PgStore::connect` of a multi-host URL. A quarter of the way through, the primary is crashed
//! and its synchronous standby promoted. Every part reaches the new primary on its own (the
//! pool's follower, the listener's and the liveness session's reconnections, the reaper for
//! the claims cut short), the ledger is exact, every outbox row is sent, and every message
//! arrives downstream (an outbox re-sends a row whose mark was lost, under the same id).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use lapin::options::{BasicGetOptions, QueueDeleteOptions};

use inboxed_core::ConsumerName;
use inboxed_postgres::PgStore;
use inboxed_rabbitmq::{RabbitConfig, RabbitPublisher, RabbitPublisherConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::amqp::{publish_keyed, queue};
use inboxed_test::pipeline::Parts;
use inboxed_test::restart::{MESSAGES, amount, ledger_counts, store_on};
use inboxed_test::throwaway::ThrowawayPg;

/// Rows of `sql` (one count) at `url`, or `None` while it cannot be read.
async fn count(url: &str, sql: &'static str) -> Option<i64> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(1))
        .connect(url)
        .await
        .ok()?;
    let n = sqlx::query_scalar(sql).fetch_one(&pool).await.ok();
    pool.close().await;
    n
}

#[tokio::test]
async fn relay_workers_and_outbox_relay_follow_a_failover() {
    let primary = ThrowawayPg::start();
    let _direct = store_on(&primary).await;
    let standby = ThrowawayPg::standby_of(&primary, "replica_a");
    primary.synchronous("replica_a").await;
    let store = PgStore::connect(
        &format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres",
            primary.port(),
            standby.port()
        ),
        16,
    )
    .await
    .unwrap();

    let (channel, input) = queue(&amqp_url()).await;
    let (_, output) = queue(&amqp_url()).await;
    publish_keyed(&channel, &input, "w", 0..MESSAGES).await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let mut parts = Parts::default();
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), &input))
        .await
        .unwrap();
    let publisher = RabbitPublisher::connect(RabbitPublisherConfig::new(amqp_url()))
        .await
        .unwrap();
    parts.store_then_process(&store, &consumer, source, 2, &output, publisher);

    // The ledger is read on the standby: a hot standby before, the primary after.
    let rows = || async { ledger_counts(&standby.url()).await.map_or(0, |(r, _)| r) };
    let deadline = Instant::now() + Duration::from_secs(150);
    while rows().await < MESSAGES / 4 {
        assert!(Instant::now() < deadline, "no progress before the failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = rows().await;
    primary.crash();
    standby.promote();
    let promoted = Instant::now();
    let survived = rows().await;
    while rows().await <= survived {
        assert!(Instant::now() < deadline, "no progress after the failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resumed = promoted.elapsed();
    let sent = "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sent'";
    while rows().await < MESSAGES || count(&standby.url(), sent).await < Some(MESSAGES) {
        assert!(
            Instant::now() < deadline,
            "stuck after the failover: {} ledger rows, {:?} outbox rows sent",
            rows().await,
            count(&standby.url(), sent).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let finished = promoted.elapsed();
    parts.stop().await;

    let (ledger, distinct) = ledger_counts(&standby.url()).await.unwrap();
    let sum = count(&standby.url(), "SELECT sum(amount)::bigint FROM ledger").await;
    assert_eq!(
        (ledger, distinct, sum),
        (MESSAGES, MESSAGES, Some((0..MESSAGES).map(amount).sum())),
        "ledger audit"
    );
    let not_done = "SELECT count(*) FROM inboxed_inbox_messages WHERE status <> 'done'";
    assert_eq!(count(&standby.url(), not_done).await, Some(0));
    // Downstream: every message at least once, under one id each.
    let (mut received, mut ids) = (0_i64, HashSet::new());
    while let Some(message) = channel
        .basic_get(output.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        received += 1;
        let id = message.delivery.properties.message_id().clone().unwrap();
        ids.insert(id.to_string());
    }
    eprintln!(
        "store-then-process through a failover: {before} rows before it, {survived} at the \
         promotion; the first row on the new primary {resumed:?} after the promotion, the last \
         {finished:?}; {received} messages published downstream for {} ids",
        ids.len()
    );
    assert_eq!(
        ids.len(),
        usize::try_from(MESSAGES).unwrap(),
        "every one sent"
    );
    for name in [input, output] {
        channel
            .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}
