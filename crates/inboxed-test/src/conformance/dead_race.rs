//! A dead letter written while a claim of its key is in flight: a redelivery that exhausted
//! its attempts beside a slow first delivery. The key must end processed or dead-lettered,
//! never both: a key in both states shows an operator a dead letter whose retry reports a
//! duplicate, for a message that was in fact processed.

use std::time::Duration;

use inboxed_core::{Envelope, Outcome, ProcessorConfig};

use super::{ledger_state, processor};
use crate::backend::{Backend, TestDb};
use crate::handler::{Script, credit};

const DEAD_LETTERS: &str = "SELECT count(*) FROM inboxed_dead_letters";

/// The first delivery holds its claim for this long inside its handler.
const HELD: Duration = Duration::from_millis(800);

fn slow(id: &str) -> Envelope {
    Script {
        amount: 7,
        sleep_ms: u64::try_from(HELD.as_millis()).expect("small"),
        ..Script::default()
    }
    .message(id)
}

/// Delivers `late` (the same key as the claim in flight) with a count past `max_attempts`,
/// once the first delivery's handler runs: its dead letter must wait for that claim and,
/// seeing it commit, settle as a duplicate.
async fn exhaust_beside<B: Backend>(db: &TestDb<B>, late: &Envelope, started: impl Fn() -> bool) {
    while !started() {
        tokio::time::sleep(Duration::from_millis(10)).await; // the claim precedes the handler
    }
    let (second, calls) = processor(db, ProcessorConfig::default().max_attempts(3));
    assert_eq!(
        second.process(late, Some(4)).await.unwrap(),
        Outcome::Duplicate,
        "the dead letter did not wait for the key's claim in flight"
    );
    assert_eq!(calls.calls(), 0);
}

/// One delivery in its handler, a redelivery with its attempts exhausted: the second
/// settles as a duplicate once the first commits, and no dead letter is written.
pub async fn exhausted_redelivery_waits_for_the_claim_in_flight<B: Backend>(_test: &str) {
    let db = B::create().await;
    let msg = slow("m-race");
    let (first, handler) = processor(&db, ProcessorConfig::default().max_attempts(3));
    let held = {
        let msg = msg.clone();
        tokio::spawn(async move { first.process(&msg, Some(1)).await })
    };
    exhaust_beside(&db, &msg, || handler.calls() > 0).await;
    assert_eq!(held.await.unwrap().unwrap(), Outcome::Processed);
    assert_eq!(ledger_state(&db).await, (1, 7));
    assert_eq!(db.scalar(DEAD_LETTERS).await, 0);
    db.finish().await;
}

/// The same beside a batch large enough that its transaction locks key buckets rather than
/// keys (PostgreSQL): the dead letter of one of its keys still waits for the batch.
pub async fn exhausted_redelivery_waits_for_a_batch_in_flight<B: Backend>(_test: &str) {
    let db = B::create().await;
    let mut batch: Vec<Envelope> = (0..69).map(|i| credit(&format!("rb-{i}"), 1)).collect();
    batch.push(slow("rb-slow"));
    let late = batch[69].clone();
    let (first, handler) = processor(&db, ProcessorConfig::default().max_attempts(3));
    let held = {
        let batch = batch.clone();
        tokio::spawn(async move { first.process_batch(&batch).await })
    };
    exhaust_beside(&db, &late, || handler.calls() > 0).await;
    let outcomes = held.await.unwrap();
    assert!(
        outcomes.iter().all(|o| matches!(o, Ok(Outcome::Processed))),
        "{outcomes:?}"
    );
    assert_eq!(ledger_state(&db).await, (70, 69 + 7));
    assert_eq!(db.scalar(DEAD_LETTERS).await, 0);
    db.finish().await;
}

/// Deliveries that give up waiting for a claim in flight never ran, so they are not attempts:
/// a consumer cut off from the database mid-transaction holds its claim until the server ends
/// its session (`idle_in_transaction_timeout`, 60 s by default), and the redeliveries that
/// time out on it meanwhile (`lock_timeout`, 5 s) must not dead-letter the message. With
/// `max_attempts` 2, two deliveries time out beside a claim that then fails; the next delivery
/// runs and is processed, counted by the store and by the broker.
///
/// Not on SQLite: there the wait is for the database's one write lock, which a delivery's own
/// attempt count waits for too, so nothing is counted while a claim is held.
pub async fn deliveries_that_wait_out_a_claim_are_not_attempts<B: Backend>(_test: &str) {
    if B::SERIAL_WRITERS {
        return;
    }
    let db = B::create().await;
    for broker in [false, true] {
        let key = if broker {
            "m-wait-broker"
        } else {
            "m-wait-store"
        };
        // The first call holds its claim for 3.5 s and fails; later ones succeed, after two
        // waits of a second (MySQL bounds a lock wait in whole seconds).
        let msg = Script {
            amount: 7,
            sleep_ms: 3_500,
            fail_first: 1,
            ..Script::default()
        }
        .message(key);
        let config = ProcessorConfig::default()
            .max_attempts(2)
            .lock_timeout(Duration::from_secs(1));
        // One handler, whose calls fail_first counts.
        let (later, handler) = processor(&db, config);
        let held = {
            let (first, msg) = (later.clone(), msg.clone());
            tokio::spawn(async move { first.process(&msg, broker.then_some(1)).await })
        };
        while handler.calls() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await; // the claim precedes the handler
        }
        for n in 2..=3 {
            let err = later
                .process(&msg, broker.then_some(n))
                .await
                .expect_err("a delivery waiting on the claim in flight gives up");
            assert!(err.is_transient(), "{err:?}");
        }
        assert!(!held.is_finished(), "the claim was held throughout");
        assert!(held.await.unwrap().unwrap_err().is_transient());
        assert_eq!(
            later.process(&msg, broker.then_some(4)).await.unwrap(),
            Outcome::Processed,
            "broker count {broker}: the deliveries that never ran were counted as attempts"
        );
        assert_eq!(db.scalar(DEAD_LETTERS).await, 0);
    }
    assert_eq!(ledger_state(&db).await, (2, 14));
    db.finish().await;
}
