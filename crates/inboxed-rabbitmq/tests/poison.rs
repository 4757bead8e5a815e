//! A message that kills its consumer process, delivered among others that are in flight beside
//! it (the consumer's default concurrency of 8): a crash must be charged to the poison, not to
//! the deliveries that happened to be running with it, so that after `max_attempts` crashes
//! the poison alone is dead-lettered and every message beside it is applied once. At the
//! defaults, on a classic queue (the store counts attempts) and on a quorum queue, whose
//! broker counts every delivery it handed the process at each crash, running or not: there the
//! broker's count only tells a first delivery apart, and the store counts the rest
//! (docs/guarantees.md, "What a crash is charged to").

use std::time::Duration;

use inboxed_core::KeySource;
use inboxed_rabbitmq::{QueueKind, RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::broker_child::{broker_child_locator, broker_child_main, spawn_broker_child};
use inboxed_test::handler::Script;
use inboxed_test::{Backend, Pg, TestDb};

/// Good messages; the poison goes fifth, so that it starts beside the first eight.
const GOOD: i64 = 15;
/// How long each good message holds its transaction: long enough to be in flight when the
/// poison aborts the process.
const HOLD_MS: u64 = 400;

#[tokio::test]
async fn a_poison_that_kills_the_process_spares_the_deliveries_beside_it() {
    let test = &inboxed_test::test_name!(
        "a_poison_that_kills_the_process_spares_the_deliveries_beside_it"
    );
    if let Some(locator) = broker_child_locator() {
        let name = std::env::var("INBOXED_RABBIT_QUEUE").unwrap();
        let config = RabbitConfig::new(amqp_url(), name).key(KeySource::MessageIdProperty);
        let src = RabbitSource::connect(config).await.unwrap();
        return broker_child_main::<Pg, _>(&locator, src).await;
    }
    for kind in [QueueKind::Classic, QueueKind::Quorum] {
        let db = Pg::create().await;
        let (channel, name) =
            inboxed_test::amqp::queue_of_kind(&amqp_url(), kind == QueueKind::Quorum).await;
        let mut messages = Vec::new();
        for i in 0..=GOOD {
            let id = format!("p-{i:02}");
            let script = if i == 4 {
                Script {
                    abort: true,
                    ..Script::default()
                }
            } else {
                Script {
                    amount: 1 << i,
                    sleep_ms: HOLD_MS,
                    ..Script::default()
                }
            };
            messages.push(script.message(&id));
        }
        inboxed_test::amqp::publish_all(&channel, &name, messages).await;
        let env = [
            ("INBOXED_RABBIT_QUEUE", name.as_str()),
            ("INBOXED_CONSUMER_CONCURRENCY", "8"),
        ];
        let runs = run_until_settled(test, &db, &env).await;
        println!("{kind:?}: {runs} consumer runs");
        let letters: Vec<(String, String, i32)> = sqlx::query_as(
            "SELECT message_id, reason, attempts FROM inboxed_dead_letters ORDER BY message_id",
        )
        .fetch_all(db.store.pool())
        .await
        .unwrap();
        assert_eq!(
            letters,
            [("p-04".to_owned(), "attempts_exhausted".to_owned(), 5)],
            "{kind:?}: the poison alone dead-lettered, after {runs} consumer runs"
        );
        let sum: i64 = (0..=GOOD).filter(|&i| i != 4).map(|i| 1 << i).sum();
        assert_eq!(
            inboxed_test::conformance::ledger_state(&db).await,
            (GOOD, sum),
            "{kind:?}: every message beside the poison applied once"
        );
        assert_eq!(inboxed_test::amqp::depth(&channel, &name).await, 0);
        db.finish().await;
    }
}

/// Starts consumer children one after another (each poisoned one aborts) until the ledger
/// holds every good message and a dead letter is written, or twelve have run; the number run.
async fn run_until_settled(test: &str, db: &TestDb<Pg>, env: &[(&str, &str)]) -> usize {
    let settled = || async {
        let rows = db.scalar("SELECT count(*) FROM ledger").await;
        let dead = db.scalar("SELECT count(*) FROM inboxed_dead_letters").await;
        rows + dead > GOOD
    };
    for run in 1..=12 {
        let mut child = spawn_broker_child(test, &db.locator, env);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if settled().await || tokio::time::Instant::now() >= deadline {
                // The acks after the last commits.
                tokio::time::sleep(Duration::from_millis(500)).await;
                child.kill().await.unwrap();
                return run;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    12
}
