//! The test kit's process-level harness (`inboxed_testkit::Chaos`) on RabbitMQ: a consumer
//! process (this test binary again, as a broker child) killed with SIGKILL at random points
//! while messages arrive through a real queue, some of them twice (producer retries); the
//! ledger audit finds each message's effect once. The same storm catches a consumer whose
//! handler writes through a second connection: a harness that cannot fail proves nothing.

use std::process::Stdio;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeleteOptions};
use lapin::{BasicProperties, Channel};
use tokio::process::Command;

use inboxed_core::KeySource;
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::broker_child::{broker_child_locator, broker_child_main};
use inboxed_test::{Backend, Pg, Script, TestDb};
use inboxed_testkit::{Chaos, ChaosConfig, ChaosFailure, ChaosReport};

/// The child's side: the suite's ledger consumer on the queue the parent named.
async fn child(locator: &str) {
    let queue = std::env::var("INBOXED_RABBIT_QUEUE").expect("the queue");
    let config = RabbitConfig::new(amqp_url(), queue)
        .prefetch(8)
        .key(KeySource::MessageIdProperty);
    let source = RabbitSource::connect(config).await.expect("RabbitMQ");
    broker_child_main::<Pg, _>(locator, source).await;
}

/// A storm of a few seconds against the consumer that `test` starts as a child with `env`
/// added (the known-bad handler, a limit of attempts); each handler call holds its
/// transaction 30 ms, so the consumer is busy when most kills land.
async fn storm(
    test: &str,
    db: &TestDb<Pg>,
    env: &'static [(&'static str, &'static str)],
) -> Result<ChaosReport, ChaosFailure> {
    let (channel, queue) = inboxed_test::amqp::queue_of_kind(&amqp_url(), false).await;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("publisher confirms");
    let exe = std::env::current_exe().expect("this test binary");
    let (test, locator, name) = (test.to_owned(), db.locator.clone(), queue.clone());
    let chaos = Chaos::new(move || {
        let mut command = Command::new(&exe);
        command
            .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env("INBOXED_BROKER_CHILD", &locator)
            .env("INBOXED_RABBIT_QUEUE", &name)
            .stdout(Stdio::null())
            // A child that dies on its own (not by a kill) says why here: once, under a loaded
            // CI run, one exited with SIGABRT before its first kill, and nothing told why.
            .stderr(Stdio::inherit())
            .envs(env.iter().copied());
        command
    });
    let mut config = ChaosConfig::default();
    config.messages = 120;
    // Six seconds: each consumer is killed only once it applied an effect, and on a loaded
    // two-core CI run a start took long enough that four seconds held three kills.
    config.storm = Duration::from_secs(6);
    config.run_between_kills = (Duration::from_millis(250), Duration::from_millis(600));
    config.quiet = Duration::from_secs(1);
    let publisher = channel.clone();
    let to = queue.clone();
    let pool = db.store.pool().clone();
    let report = chaos
        .with_config(config)
        .with_dead_letters_of(
            db.store.clone(),
            &inboxed_core::ConsumerName::new("ledger").unwrap(),
        )
        .run(
            move |id: String, _n: u64| {
                let (channel, queue) = (publisher.clone(), to.clone());
                async move { publish(&channel, &queue, &id).await }
            },
            move || {
                let pool = pool.clone();
                async move {
                    sqlx::query_as::<_, (String, i64)>(
                        "SELECT message_id, count(*) FROM ledger GROUP BY message_id",
                    )
                    .fetch_all(&pool)
                    .await
                }
            },
        )
        .await;
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .expect("delete the queue");
    report
}

/// Publishes a credit under `id`, persistent, and waits for the broker's confirm.
async fn publish(channel: &Channel, queue: &str, id: &str) -> Result<(), lapin::Error> {
    let body = Script {
        sleep_ms: 30,
        ..Script::default()
    }
    .message(id);
    let props = BasicProperties::default()
        .with_delivery_mode(2)
        .with_message_id(id.into());
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            body.payload(),
            props,
        )
        .await?
        .await?;
    Ok(())
}

/// The suite's ledger consumer, killed at random points for 6 s while 120 messages (about a
/// quarter of them published twice) arrive: each message's effect once. The consumer whose
/// handler commits its ledger row on a second connection, under the same storm, is caught
/// with doubled messages; one allowed a single attempt (each delivery a kill caught in flight
/// is then dead-lettered at its redelivery) is caught with dead-lettered ones, named as such.
#[tokio::test]
async fn a_consumer_killed_at_random_points_applies_every_message_once() {
    let test =
        &inboxed_test::test_name!("a_consumer_killed_at_random_points_applies_every_message_once");
    if let Some(locator) = broker_child_locator() {
        return child(&locator).await;
    }
    let db = Pg::create().await;
    // More attempts than the storm can charge a message (a message alone in its process at a
    // kill is charged for it; copies published twice, twice): the storm checks effects.
    let report = storm(test, &db, &[("INBOXED_MAX_ATTEMPTS", "50")])
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
    println!("{report}");
    assert!(report.kills >= 4, "the storm killed too few: {report}");
    db.finish().await;

    let db = Pg::create().await;
    let bad = &[("INBOXED_CHILD_HANDLER", "second_connection")];
    match storm(test, &db, bad).await {
        Err(ChaosFailure::NotExact(report)) => {
            println!("caught: {report}");
            assert!(!report.doubled.is_empty(), "{report}");
        }
        Err(other) => panic!("the storm broke instead of catching the handler: {other}"),
        Ok(report) => panic!("a handler writing on a second connection passed: {report}"),
    }
    db.finish().await;

    let db = Pg::create().await;
    match storm(test, &db, &[("INBOXED_MAX_ATTEMPTS", "1")]).await {
        Err(ChaosFailure::NotExact(report)) => {
            println!("caught: {report}");
            assert!(!report.dead_lettered.is_empty(), "{report}");
            assert!(report.lost.is_empty(), "dead-lettered, not lost: {report}");
            assert!(
                report
                    .dead_lettered
                    .iter()
                    .all(|(_, reason)| reason == "attempts_exhausted"),
                "{report}"
            );
        }
        Err(other) => panic!("the storm broke instead of reporting dead letters: {other}"),
        Ok(report) => panic!("one attempt under kills dead-lettered nothing: {report}"),
    }
    db.finish().await;
}
