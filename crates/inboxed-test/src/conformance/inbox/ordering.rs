//! Per-aggregate ordering and parking.

use std::sync::atomic::Ordering;

use inboxed_core::inbox::{OnDead, Selector, Worker, WorkerConfig};

use super::{drain, enqueue_all, inbox, with_status, worker};
use crate::backend::Backend;
use crate::handler::{Ledger, Script};

const AGGREGATES: usize = 6;
const PER_AGGREGATE: i64 = 25;

fn event(aggregate: usize, seq: i64) -> inboxed_core::Envelope {
    let script = Script {
        account: format!("agg-{aggregate}"),
        amount: seq,
        check_order: true,
        fail_while_broken: aggregate == 0,
        ..Script::default()
    };
    script
        .message(&format!("o-{aggregate}-{seq}"))
        .with_aggregate(format!("agg-{aggregate}"))
}

/// In ordered mode, with 4 workers claiming batches concurrently, each aggregate's events are
/// applied in arrival order (the handler checks the per-aggregate sequence in the ledger and
/// fails on a gap). A dead event parks its aggregate while the others go on; replaying it after
/// the fix releases the aggregate, still in order.
pub async fn ordered_mode_keeps_order_and_parks_dead_aggregates<B: Backend>(_test: &str) {
    let db = B::create().await;
    let mut messages = Vec::new();
    for seq in 1..=PER_AGGREGATE {
        for a in 0..AGGREGATES {
            messages.push(event(a, seq));
        }
    }
    enqueue_all(&db, messages, 1).await;
    let handler = Ledger::<B>::default();
    let config = WorkerConfig::default()
        .batch_size(8)
        .ordered(true, OnDead::Park);
    let workers: Vec<Worker<_, _>> = (0..4)
        .map(|_| worker(&db, config.clone(), &handler))
        .collect();

    // Process part of the stream, then break the handler for one event of aggregate 0.
    for _ in 0..3 {
        for w in &workers {
            w.run_once().await.unwrap();
        }
    }
    let parked_seq = db
        .scalar(
            "SELECT CAST(coalesce(max(amount), 0) AS BIGINT) FROM ledger WHERE account = 'agg-0'",
        )
        .await
        + 1;
    handler.broken.store(true, Ordering::SeqCst);
    while with_status(&db, "dead").await == 0 {
        workers[0].run_once().await.unwrap();
    }
    handler.broken.store(false, Ordering::SeqCst);
    drain(&db, &workers).await;

    // Everything but aggregate 0 is done; aggregate 0 stopped at the dead event.
    let a0 = db
        .scalar(
            "SELECT CAST(coalesce(max(amount), 0) AS BIGINT) FROM ledger WHERE account = 'agg-0'",
        )
        .await;
    assert_eq!(
        a0,
        parked_seq - 1,
        "aggregate 0 is parked behind its dead event"
    );
    let others = db
        .scalar("SELECT count(*) FROM ledger WHERE account <> 'agg-0'")
        .await;
    assert_eq!(
        others,
        (AGGREGATES as i64 - 1) * PER_AGGREGATE,
        "other aggregates were not held"
    );
    assert_eq!(with_status(&db, "dead").await, 1);
    assert_eq!(
        with_status(&db, "pending").await,
        PER_AGGREGATE - parked_seq,
        "later events of aggregate 0 wait"
    );

    let replayed = inbox(&db)
        .replay(
            &Selector::aggregate("agg-0"),
            false,
            "ops",
            "fixed the handler",
        )
        .await
        .unwrap();
    assert_eq!(replayed.ids.len(), 1);
    drain(&db, &workers).await;
    let total = db.scalar("SELECT count(*) FROM ledger").await;
    assert_eq!(
        total,
        AGGREGATES as i64 * PER_AGGREGATE,
        "every event applied once, none out of order"
    );
    assert_eq!(with_status(&db, "dead").await, 0);
    db.finish().await;
}

/// With `OnDead::Skip`, a dead event does not hold back the later events of its aggregate:
/// they are processed (in order), and the dead one stays dead for an operator.
pub async fn ordered_mode_can_skip_dead_events<B: Backend>(_test: &str) {
    let db = B::create().await;
    let inbox = inbox(&db);
    for seq in 1..=5 {
        let fail = (seq == 2).then(|| "permanent".to_owned());
        let script = Script {
            account: "agg-s".into(),
            amount: seq,
            fail,
            ..Script::default()
        };
        inbox
            .store(&script.message(&format!("k-{seq}")).with_aggregate("agg-s"))
            .await
            .unwrap();
    }
    let handler = Ledger::<B>::default();
    let w = worker(
        &db,
        WorkerConfig::default()
            .batch_size(10)
            .ordered(true, OnDead::Skip),
        &handler,
    );
    drain(&db, std::slice::from_ref(&w)).await;
    assert_eq!(with_status(&db, "dead").await, 1);
    assert_eq!(with_status(&db, "done").await, 4);
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE account = 'agg-s'")
            .await,
        4
    );
    db.finish().await;
}
