//! `Processor::process_batch`: many messages in one transaction and one commit, with the same
//! guarantees as one at a time, asserted on the ledger.

use std::sync::Arc;

use tokio::sync::Barrier;

use inboxed_core::{DeadLetterReason, Envelope, Outcome, ProcessorConfig};

use super::{ledger_state, processor};
use crate::backend::Backend;
use crate::handler::{Script, credit};

/// The outcomes of a batch that must have settled every message.
fn settled(results: Vec<Result<Outcome, inboxed_core::Error>>) -> Vec<Outcome> {
    results.into_iter().map(Result::unwrap).collect()
}

const ATTEMPT_ROWS: &str = "SELECT count(*) FROM inboxed_attempts";
const REDRIVEN_LETTERS: &str = "SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'b-r'";
const POISON_LETTERS: &str = "SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'b-p'";

/// Fresh keys are processed once in one batch; a key given twice, and a key processed
/// earlier, settle as duplicates; the attempt counters are forgotten in the same commit; the
/// same batch again changes nothing.
pub async fn batch_processes_each_key_once<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    assert_eq!(
        p.process(&credit("b-3", 3), None).await.unwrap(),
        Outcome::Processed
    );
    let batch = [
        credit("b-1", 1),
        credit("b-2", 2),
        credit("b-1", 1),
        credit("b-3", 3),
    ];
    let outcomes = settled(p.process_batch(&batch).await);
    assert_eq!(
        outcomes,
        [
            Outcome::Processed,
            Outcome::Processed,
            Outcome::Duplicate,
            Outcome::Duplicate
        ]
    );
    assert_eq!(ledger_state(&db).await, (3, 6));
    assert_eq!(handler.calls(), 3, "one call per fresh message");
    assert_eq!(
        handler.batches(),
        1,
        "the fresh messages went to the handler together"
    );
    assert_eq!(db.scalar(ATTEMPT_ROWS).await, 0);
    let again = p.process_batch(&batch).await;
    assert!(
        again.iter().all(|r| matches!(r, Ok(Outcome::Duplicate))),
        "{again:?}"
    );
    assert_eq!(ledger_state(&db).await, (3, 6));
    assert_eq!(handler.batches(), 1, "nothing fresh, no handler call");
    // A processed key with another payload is a conflict, found by the batch's claim; its
    // fresh batch-mate is applied.
    let conflicting = p.process_batch(&[credit("b-2", 9), credit("b-4", 4)]).await;
    assert!(
        matches!(
            conflicting.as_slice(),
            [Ok(Outcome::Conflict { .. }), Ok(Outcome::Processed)]
        ),
        "{conflicting:?}"
    );
    assert_eq!(ledger_state(&db).await, (4, 10));
    assert_eq!(handler.batches(), 2);
    db.finish().await;
}

/// A message that fails permanently in the middle of a batch is dead-lettered alone; its
/// batch-mates before and after it commit.
pub async fn poison_in_a_batch_spares_its_batch_mates<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    let poison = Script {
        fail: Some("permanent".into()),
        ..Script::default()
    }
    .message("b-p");
    let batch = [credit("b-x", 4), poison, credit("b-y", 5)];
    let results = p.process_batch(&batch).await;
    let outcomes = settled(results);
    let reason = DeadLetterReason::Permanent;
    assert_eq!(
        outcomes,
        [
            Outcome::Processed,
            Outcome::DeadLettered { reason },
            Outcome::Processed
        ]
    );
    assert_eq!(ledger_state(&db).await, (2, 9));
    assert_eq!(db.scalar(POISON_LETTERS).await, 1);
    assert_eq!(db.scalar(ATTEMPT_ROWS).await, 0);
    assert_eq!(handler.batches(), 1, "tried together once, then one by one");
    // Delivered again beside a fresh message, the batch goes together (no key has a counter
    // left): the dead-lettered key is found by the batch's claim and stays dead, the applied
    // ones are duplicates, and only the fresh one is applied.
    let again = [
        batch[0].clone(),
        batch[1].clone(),
        credit("b-z", 6),
        batch[2].clone(),
    ];
    let outcomes = settled(p.process_batch(&again).await);
    assert_eq!(
        outcomes,
        [
            Outcome::Duplicate,
            Outcome::AlreadyDeadLettered,
            Outcome::Processed,
            Outcome::Duplicate
        ]
    );
    assert_eq!(ledger_state(&db).await, (3, 15));
    assert_eq!(db.scalar(POISON_LETTERS).await, 1);
    assert_eq!(db.scalar(ATTEMPT_ROWS).await, 0);
    assert_eq!(handler.batches(), 2, "the second batch went together");
    db.finish().await;
}

/// First deliveries (broker count 1) go together without being counted in the store: a
/// message that fails in such a batch is retried by the broker, not by a store counter, and
/// its batch-mates commit. Redelivered (count 2) beside a fresh message, the batch is counted
/// in the store and goes together again.
pub async fn first_deliveries_skip_the_store_count<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    // Fails transiently on the handler's calls 1 to 4: its call in the batch (2) and its own
    // call after it (4); succeeds when redelivered.
    let flaky = Script {
        amount: 2,
        fail_first: 4,
        ..Script::default()
    }
    .message("b-t");
    let batch = [credit("b-a", 1), flaky.clone(), credit("b-c", 4)];
    let results = p
        .process_batch_with_counts(&batch, &[Some(1), Some(1), Some(1)])
        .await;
    assert!(
        matches!(
            results.as_slice(),
            [Ok(Outcome::Processed), Err(_), Ok(Outcome::Processed)]
        ),
        "{results:?}"
    );
    assert_eq!(ledger_state(&db).await, (2, 5));
    assert_eq!(
        db.scalar(ATTEMPT_ROWS).await,
        0,
        "the broker counts, not the store"
    );
    assert_eq!(handler.batches(), 1);
    let outcomes = settled(
        p.process_batch_with_counts(&[flaky, credit("b-d", 8)], &[Some(2), Some(1)])
            .await,
    );
    assert_eq!(outcomes, [Outcome::Processed, Outcome::Processed]);
    assert_eq!(ledger_state(&db).await, (4, 15));
    assert_eq!(db.scalar(ATTEMPT_ROWS).await, 0);
    assert_eq!(handler.batches(), 2, "the redelivered batch went together");
    db.finish().await;
}

/// A batch that is not all first deliveries counts each attempt as the single path does: a
/// first delivery (broker count 1) is attempt 1 and writes nothing, a redelivery (count 2) is
/// the store's count plus its uncounted first delivery. The first delivery's own redelivery
/// is then attempt 2, not 3.
pub async fn a_mixed_batch_counts_attempts_as_one_at_a_time<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _handler) = processor(&db, ProcessorConfig::default());
    let failing = |id: &str| {
        Script {
            fail: Some("transient".into()),
            ..Script::default()
        }
        .message(id)
    };
    let (fresh, again) = (failing("b-f"), failing("b-g"));
    let results = p
        .process_batch_with_counts(&[fresh.clone(), again], &[Some(1), Some(2)])
        .await;
    let attempts: Vec<u32> = results
        .iter()
        .map(|r| match r {
            Err(inboxed_core::Error::Handler { attempt, .. }) => *attempt,
            other => panic!("a transient failure, not {other:?}"),
        })
        .collect();
    assert_eq!(attempts, [1, 2], "first delivery, then a redelivery");
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_attempts WHERE message_id = 'b-f'")
            .await,
        0,
        "a first delivery writes nothing"
    );
    match p.process(&fresh, Some(2)).await {
        Err(inboxed_core::Error::Handler { attempt, .. }) => assert_eq!(attempt, 2),
        other => panic!("a transient failure, not {other:?}"),
    }
    db.finish().await;
}

/// An operator's redrive inside a batch takes the single path: it lifts the dead letter and
/// is applied, next to a fresh message applied with the batch.
pub async fn redrive_in_a_batch_lifts_its_dead_letter<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    let broken = Script {
        amount: 7,
        fail_while_broken: true,
        ..Script::default()
    }
    .message("b-r");
    handler
        .broken
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(matches!(
        p.process(&broken, None).await.unwrap(),
        Outcome::DeadLettered { .. }
    ));
    handler
        .broken
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let batch = [broken.with_redrive_for("ledger"), credit("b-f", 1)];
    let outcomes = settled(p.process_batch(&batch).await);
    assert_eq!(outcomes, [Outcome::Processed, Outcome::Processed]);
    assert_eq!(ledger_state(&db).await, (2, 8));
    assert_eq!(db.scalar(REDRIVEN_LETTERS).await, 0);
    db.finish().await;
}

/// Two batches sharing five of their keys, started together behind a barrier: every key is
/// applied exactly once, and both batches settle every message.
pub async fn concurrent_batches_commit_each_key_once<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    let barrier = Arc::new(Barrier::new(2));
    let batch = |range: std::ops::Range<i64>| -> Vec<Envelope> {
        range.map(|i| credit(&format!("c-{i}"), i)).collect()
    };
    let tasks = [batch(0..10), batch(5..15)].map(|msgs| {
        let (p, barrier) = (p.clone(), Arc::clone(&barrier));
        tokio::spawn(async move {
            barrier.wait().await;
            p.process_batch(&msgs).await
        })
    });
    let mut processed = 0;
    for task in tasks {
        for result in task.await.unwrap() {
            match result.unwrap() {
                Outcome::Processed => processed += 1,
                Outcome::Duplicate => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(processed, 15);
    assert!(handler.batches() >= 1, "at least one batch ran together");
    assert_eq!(ledger_state(&db).await, (15, (0..15).sum::<i64>()));
    db.finish().await;
}
