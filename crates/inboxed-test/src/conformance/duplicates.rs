//! The spec's first two tests: a sequential duplicate and concurrent duplicates at a barrier.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;

use inboxed_core::{ConsumerName, Outcome, Processor, ProcessorConfig};

use super::{ledger, ledger_state, processor};
use crate::backend::Backend;
use crate::handler::{Ledger, Script, credit};
use crate::hooks::{HookPoint, Hooked};

/// Deliver the same id twice: the effect lands once and the second delivery runs no handler.
/// A second consumer of the same message records its own row and applies its own effect.
pub async fn sequential_duplicate_applies_effect_once<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    let msg = credit("m-1", 10);
    assert_eq!(p.process(&msg, Some(1)).await.unwrap(), Outcome::Processed);
    assert_eq!(p.process(&msg, Some(2)).await.unwrap(), Outcome::Duplicate);
    assert_eq!(handler.calls(), 1, "the duplicate must not run the handler");
    assert_eq!(ledger_state(&db).await, (1, 10));

    // Durable attempt counting (no broker count): same result, and no counter left behind.
    let msg = credit("m-2", 5);
    assert_eq!(p.process(&msg, None).await.unwrap(), Outcome::Processed);
    assert_eq!(p.process(&msg, None).await.unwrap(), Outcome::Duplicate);
    assert_eq!(ledger_state(&db).await, (2, 15));
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_attempts").await, 0);

    let other = Ledger::<B>::default();
    let notifications = ConsumerName::new("notifications").unwrap();
    let p2 = Processor::new(db.store.clone(), notifications, other.clone());
    assert_eq!(
        p2.process(&credit("m-1", 10), Some(1)).await.unwrap(),
        Outcome::Processed
    );
    assert_eq!(ledger_state(&db).await, (3, 25));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        3
    );
    db.finish().await;
}

/// Two deliveries of one message released together from a barrier just before the claim
/// (before `BEGIN` where writers serialize): exactly one commits, the other waits on it and
/// settles as a duplicate.
pub async fn concurrent_duplicates_commit_exactly_once<B: Backend>(_test: &str) {
    let db = B::create().await;
    let msg = Script {
        amount: 7,
        sleep_ms: 300,
        ..Script::default()
    }
    .message("m-c");
    let (results, handler) = race::<B>(&db.store, &msg).await;
    let mut outcomes: Vec<Outcome> = results
        .iter()
        .map(|(o, _)| *o.as_ref().expect("both settle"))
        .collect();
    outcomes.sort_by_key(|o| o.as_str());
    assert_eq!(outcomes, vec![Outcome::Duplicate, Outcome::Processed]);
    assert_eq!(handler.calls(), 1);
    // The duplicate's own latency, not the winner's (which includes its 300 ms in the handler).
    let waited = results
        .iter()
        .find(|(o, _)| matches!(o, Ok(Outcome::Duplicate)))
        .map(|(_, t)| *t);
    assert!(
        waited >= Some(Duration::from_millis(250)),
        "the duplicate must wait for the winner's commit ({waited:?})"
    );
    assert_eq!(ledger_state(&db).await, (1, 7));
    db.finish().await;
}

/// The variant where the first claimant rolls back: the waiting duplicate then proceeds and
/// applies the effect itself, still exactly once.
pub async fn concurrent_duplicate_proceeds_after_first_rolls_back<B: Backend>(_test: &str) {
    let db = B::create().await;
    let msg = Script {
        amount: 3,
        sleep_ms: 300,
        fail_first: 1,
        ..Script::default()
    }
    .message("m-r");
    let (results, handler) = race::<B>(&db.store, &msg).await;
    let processed = results
        .iter()
        .filter(|(o, _)| matches!(o, Ok(Outcome::Processed)))
        .count();
    let failed = results
        .iter()
        .filter(|(o, _)| o.as_ref().is_err_and(|e| e.is_transient()))
        .count();
    assert_eq!((processed, failed), (1, 1), "{results:?}");
    assert_eq!(
        handler.calls(),
        2,
        "the second delivery ran the handler after the rollback"
    );
    assert_eq!(ledger_state(&db).await, (1, 3));
    db.finish().await;
}

type Timed = (Result<Outcome, inboxed_core::Error>, Duration);

/// Runs two deliveries of `msg` from a barrier; returns each result with its own latency, and
/// the shared handler.
async fn race<B: Backend>(
    store: &B::Store,
    msg: &inboxed_core::Envelope,
) -> (Vec<Timed>, Ledger<B>) {
    let point = if B::SERIAL_WRITERS {
        HookPoint::BeforeBegin
    } else {
        HookPoint::BeforeClaim
    };
    let barrier = Arc::new(Barrier::new(2));
    let handler = Ledger::<B>::default();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let p = Processor::new(
            Hooked::new(store.clone(), barrier.clone(), point),
            ledger(),
            handler.clone(),
        );
        p.ensure_ready().await.unwrap();
        let msg = msg.clone();
        tasks.push(tokio::spawn(async move {
            let started = Instant::now();
            let out = p.process(&msg, Some(1)).await;
            (out, started.elapsed())
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("task"));
    }
    (results, handler)
}

/// A claimant whose handler hangs keeps its claim; a duplicate delivered meanwhile gives up
/// after `lock_timeout` with a transient error (so it is requeued) instead of waiting with it.
/// Once the first commits, the redelivery settles as a duplicate.
pub async fn hung_claimant_does_not_block_its_duplicate<B: Backend>(_test: &str) {
    let db = B::create().await;
    let slow = Script {
        amount: 4,
        sleep_ms: 3_000,
        ..Script::default()
    }
    .message("m-hung");
    let (first, handler) = processor(&db, ProcessorConfig::default());
    let msg = slow.clone();
    let held = tokio::spawn(async move { first.process(&msg, Some(1)).await });
    while handler.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await; // the claim precedes the handler
    }
    let impatient = ProcessorConfig::default().lock_timeout(Duration::from_millis(300));
    let (second, _) = processor(&db, impatient);
    let err = second.process(&slow, Some(2)).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(
        !held.is_finished(),
        "the duplicate gave up while the first still held its claim"
    );
    assert_eq!(held.await.unwrap().unwrap(), Outcome::Processed);
    assert_eq!(
        second.process(&slow, Some(3)).await.unwrap(),
        Outcome::Duplicate
    );
    assert_eq!(ledger_state(&db).await, (1, 4));
    db.finish().await;
}
