//! A consumer group's rebalances: three member processes of one group on a topic of six
//! partitions, six accounts, each account's credits on one partition in sequence. A quarter of
//! the way through, one member is killed with SIGKILL; its partitions move to the others once
//! its session times out, and the records it had not committed are delivered to their new
//! owner (a record whose transaction had committed settles as a duplicate). Half-way, a fourth
//! member joins and partitions move again. The ledger holds every record once, and every
//! account's credits were applied in their order: the handler refuses a credit that does not
//! follow the account's last, which would dead-letter it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::io::{AsyncBufReadExt, BufReader};

use inboxed_kafka::{KafkaConfig, KafkaSource};
use inboxed_test::broker_child::{broker_child_locator, broker_child_main, spawn_broker_child};
use inboxed_test::{Backend, Pg, Script};

use common::{brokers, topic_with};

const PARTITIONS: i32 = 6;
/// Credits per account (one account per partition).
const PER_ACCOUNT: i64 = 300;

/// A member's settings: the group's name unique to the topic, and a session short enough that
/// a killed member's partitions move within seconds.
fn config(topic: &str) -> KafkaConfig {
    KafkaConfig::new(brokers(), format!("rebalance-{topic}"), [topic])
        .commit_interval(Duration::from_millis(100))
        .property("session.timeout.ms", "6000")
}

/// Starts a member process, reading its output so that it never blocks on a full pipe.
fn member(test: &str, locator: &str, topic: &str) -> tokio::process::Child {
    let mut child = spawn_broker_child(test, locator, &[("INBOXED_KAFKA_TOPIC", topic)]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

#[tokio::test]
async fn members_killed_and_added_move_partitions_without_loss_or_reorder() {
    let test = &inboxed_test::test_name!(
        "members_killed_and_added_move_partitions_without_loss_or_reorder"
    );
    if let Some(locator) = broker_child_locator() {
        let name = std::env::var("INBOXED_KAFKA_TOPIC").unwrap();
        let src = KafkaSource::connect(config(&name)).await.unwrap();
        return broker_child_main::<Pg, _>(&locator, src).await;
    }
    let db = Pg::create().await;
    let name = topic_with(PARTITIONS).await;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    for amount in 1..=PER_ACCOUNT {
        let mut sends = tokio::task::JoinSet::new();
        for partition in 0..PARTITIONS {
            let id = format!("p{partition}-{amount}");
            // Each holds its transaction 5 ms: the stream lasts a few seconds.
            let body = Script {
                account: format!("acct-{partition}"),
                amount,
                check_order: true,
                sleep_ms: 5,
                ..Script::default()
            }
            .message(&id)
            .payload()
            .to_vec();
            let producer = producer.clone();
            let name = name.clone();
            sends.spawn(async move {
                let headers = OwnedHeaders::new().insert(Header {
                    key: "message_id",
                    value: Some(id.as_str()),
                });
                let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(&name)
                    .partition(partition)
                    .payload(body.as_slice())
                    .headers(headers);
                producer
                    .send(record, Duration::from_secs(10))
                    .await
                    .map_err(|(e, _)| e)
                    .unwrap();
            });
        }
        // In order within each partition: a partition's records are sent one round at a time.
        while let Some(sent) = sends.join_next().await {
            sent.unwrap();
        }
    }
    let total = PER_ACCOUNT * i64::from(PARTITIONS);
    let rows = || db.scalar("SELECT count(*) FROM ledger");

    let mut members: Vec<_> = (0..3).map(|_| member(test, &db.locator, &name)).collect();
    let deadline = Instant::now() + Duration::from_secs(150);
    while rows().await < total / 4 {
        assert!(Instant::now() < deadline, "no progress before the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at_kill = rows().await;
    members[0].kill().await.unwrap();
    let killed = Instant::now();
    while rows().await < total / 2 {
        assert!(Instant::now() < deadline, "no progress after the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at_join = rows().await;
    let moved = killed.elapsed();
    members.push(member(test, &db.locator, &name));
    while rows().await < total {
        assert!(
            Instant::now() < deadline,
            "stuck at {} of {total} after the rebalances; {} dead letters",
            rows().await,
            db.scalar("SELECT count(*) FROM inboxed_dead_letters").await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let whole = killed.elapsed();
    // Records delivered again to a new owner settle as duplicates meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for mut m in members {
        let _ = m.kill().await;
    }
    eprintln!(
        "rebalances: a member of three killed at {at_kill} of {total} rows, a fourth joined at \
         {at_join} ({moved:?} after the kill), every record applied {whole:?} after the kill"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
        0,
        "no credit out of its account's order, none failed"
    );
    assert_eq!(
        (
            rows().await,
            db.scalar("SELECT count(DISTINCT message_id) FROM ledger")
                .await
        ),
        (total, total),
        "every record once"
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM (SELECT account FROM ledger GROUP BY account \
             HAVING count(*) = 300 AND max(amount) = 300 AND sum(amount) = 45150) whole"
        )
        .await,
        i64::from(PARTITIONS),
        "each account whole"
    );
    db.finish().await;
}
