//! Rate limits: a message over its bucket's limit is handed back before it runs and uses up no
//! attempt; the overall limit paces what is taken; an in-order delivery waits in place.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use inboxed_core::inbox::{ClaimMode, WorkerConfig};
use inboxed_core::{
    Consumer, ConsumerConfig, Envelope, Outcome, ProcessorConfig, RateLimit, Settled, settle,
};

use super::consumer::{Log, Memory, Source};
use super::inbox::{enqueue_all, with_status, worker};
use super::{ledger_state, processor};
use crate::backend::{Backend, TestDb};
use crate::handler::{Ledger, credit};

/// The bucket of `<bucket>-<n>`: what comes before the dash.
fn bucket_of(envelope: &Envelope) -> Option<String> {
    envelope
        .id()
        .as_str()
        .split_once('-')
        .map(|(bucket, _)| bucket.to_owned())
}

/// One permit a minute per bucket: a second message of a bucket waits about a minute.
fn one_a_minute_per_bucket() -> RateLimit {
    RateLimit::none().per_bucket(1, Duration::from_secs(60), bucket_of)
}

fn deliveries<B: Backend>(
    db: &TestDb<B>,
    log: &Log,
    ids: &[&str],
    in_order: bool,
) -> VecDeque<Memory<B>> {
    ids.iter()
        .map(|id| Memory::<B> {
            id: (*id).to_owned(),
            payload: credit(id, 1).payload().to_vec(),
            store: db.store.clone(),
            log: log.clone(),
            in_order,
        })
        .collect()
}

fn logged(log: &Log, what: &str) -> Vec<String> {
    let log = log.lock().expect("log");
    log.iter()
        .filter(|(_, w, _)| *w == what)
        .map(|(id, _, _)| id.clone())
        .collect()
}

/// A delivery over its bucket's limit is handed back with the wait as its delay, before its
/// handler runs (no call, no attempt, no row); another bucket goes through; in a batch, each
/// bucket gets its permits and the rest are handed back; an in-order delivery waits in place for
/// its permit instead; the overall limit paces a consumer (30 messages at 10 a second, a burst
/// of 10, take at least 2 s).
pub async fn consumer_rate_limits_defer_by_bucket_and_pace_overall<B: Backend>(_test: &str) {
    let db = B::create().await;
    let config = ProcessorConfig::default().rate_limit(one_a_minute_per_bucket());
    let (p, handler) = processor(&db, config);
    let log: Log = Arc::default();
    let mut queue = deliveries(&db, &log, &["a-1", "a-2", "b-1"], false);
    let mut outcomes = Vec::new();
    while let Some(delivery) = queue.pop_front() {
        outcomes.push(settle(&p, delivery, None).await.expect("settled"));
    }
    assert!(matches!(outcomes[0], Settled::Acked(Outcome::Processed)));
    let Settled::Deferred { delay } = outcomes[1] else {
        panic!("a-2 was not deferred: {:?}", outcomes[1]);
    };
    assert!(
        delay > Duration::from_secs(50) && delay <= Duration::from_secs(60),
        "{delay:?}"
    );
    assert!(matches!(outcomes[2], Settled::Acked(Outcome::Processed)));
    assert_eq!(logged(&log, "requeue"), ["a-2"]);
    assert_eq!(handler.calls.load(Ordering::SeqCst), 2);
    assert_eq!(ledger_state(&db).await, (2, 2));

    // In a batch: buckets c and d get one permit each; the rest are handed back, none run.
    let (p, handler) = processor(
        &db,
        ProcessorConfig::default().rate_limit(one_a_minute_per_bucket()),
    );
    let log: Log = Arc::default();
    let ids = ["c-1", "c-2", "d-1", "c-3", "d-2", "d-3"];
    // One batch at a time, so that the permits go in arrival order.
    let consumer = Consumer::new(p, ConsumerConfig::default().concurrency(1).batch_size(8));
    let source = Source(deliveries(&db, &log, &ids, false));
    consumer
        .run(source, std::future::pending::<()>())
        .await
        .expect("run");
    let mut acked = logged(&log, "ack");
    acked.sort();
    assert_eq!(acked, ["c-1", "d-1"]);
    let mut deferred = logged(&log, "requeue");
    deferred.sort();
    assert_eq!(deferred, ["c-2", "c-3", "d-2", "d-3"]);
    assert_eq!(handler.calls.load(Ordering::SeqCst), 2);
    assert_eq!(ledger_state(&db).await, (4, 4));

    // In order: two of one bucket a second, the second waits its turn in place.
    let limit = RateLimit::none().per_bucket(1, Duration::from_secs(1), bucket_of);
    let (p, _) = processor(&db, ProcessorConfig::default().rate_limit(limit));
    let log: Log = Arc::default();
    let started = Instant::now();
    for delivery in deliveries(&db, &log, &["e-1", "e-2"], true) {
        settle(&p, delivery, None).await.expect("settled");
    }
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(logged(&log, "ack"), ["e-1", "e-2"]);
    assert!(logged(&log, "requeue").is_empty());
    assert_eq!(ledger_state(&db).await, (6, 6));

    // Overall: a burst of 10, then one every 100 ms.
    let limit = RateLimit::new(10, Duration::from_secs(1));
    let (p, _) = processor(&db, ProcessorConfig::default().rate_limit(limit));
    let log: Log = Arc::default();
    let ids: Vec<String> = (0..30).map(|i| format!("f{i}-1")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let started = Instant::now();
    let consumer = Consumer::new(p, ConsumerConfig::default().concurrency(4));
    let source = Source(deliveries(&db, &log, &ids, false));
    consumer
        .run(source, std::future::pending::<()>())
        .await
        .expect("run");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1_900), "{took:?}");
    assert_eq!(logged(&log, "ack").len(), 30);
    assert_eq!(ledger_state(&db).await, (36, 36));
    db.finish().await;
}

/// A worker hands back a claimed row over its bucket's limit with its attempt given back and
/// `available_at` moved to its slot, so the next claim does not take it again; the overall
/// limit caps what a claim takes at the permits at hand. In both claim modes where the engine
/// has them.
pub async fn worker_rate_limits_defer_by_bucket_and_cap_claims<B: Backend>(_test: &str) {
    let db = B::create().await;
    let mut modes = vec![ClaimMode::Lease];
    if !B::SERIAL_WRITERS {
        modes.push(ClaimMode::LockHeld);
    }
    let mut applied = 0;
    for (round, mode) in modes.into_iter().enumerate() {
        let handler = Ledger::<B>::default();
        let ids: Vec<String> = ["a", "a", "a", "b", "b", "b"]
            .iter()
            .enumerate()
            .map(|(i, bucket)| format!("{bucket}{round}-{i}"))
            .collect();
        enqueue_all(&db, ids.iter().map(|id| credit(id, 1)).collect(), 1).await;
        let config = WorkerConfig::default()
            .claim_mode(mode)
            .rate_limit(one_a_minute_per_bucket());
        let w = worker(&db, config, &handler);
        let report = w.run_once().await.expect("run");
        assert_eq!(
            (report.claimed, report.done, report.deferred),
            (6, 2, 4),
            "{mode:?}: {report:?}"
        );
        applied += 2;
        assert_eq!(ledger_state(&db).await, (applied, applied), "{mode:?}");
        assert_eq!(handler.calls.load(Ordering::SeqCst), 2, "{mode:?}");
        // Pending, their attempts as before the claim, and not claimable for a while.
        assert_eq!(with_status(&db, "pending").await, 4, "{mode:?}");
        let charged = db
            .scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'pending' AND attempts > 0")
            .await;
        assert_eq!(charged, 0, "{mode:?}");
        let again = w.run_once().await.expect("run");
        assert_eq!(again.claimed, 0, "{mode:?}: {again:?}");
        // Done with this round's rows: out of the next round's way.
        B::execute(
            &db.store,
            "DELETE FROM inboxed_inbox_messages WHERE status = 'pending'",
        )
        .await;
    }

    // Overall: 3 permits at hand, so the claim takes 3 of the 10 rows.
    let handler = Ledger::<B>::default();
    let messages = (0..10).map(|i| credit(&format!("o-{i}"), 1)).collect();
    enqueue_all(&db, messages, 1).await;
    let config = WorkerConfig::default().rate_limit(RateLimit::new(3, Duration::from_secs(60)));
    let report = worker(&db, config, &handler).run_once().await.expect("run");
    assert_eq!((report.claimed, report.done), (3, 3), "{report:?}");
    assert_eq!(with_status(&db, "pending").await, 7);
    assert_eq!(ledger_state(&db).await, (applied + 3, applied + 3));
    db.finish().await;
}
