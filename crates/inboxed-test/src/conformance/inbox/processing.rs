//! Workers at volume, with duplicates and random failures; poison rows.

use inboxed_core::driver::Transaction as _;
use inboxed_core::inbox::{Worker, WorkerConfig};

use super::{drain, enqueue_all, inbox, with_status, worker};
use crate::backend::Backend;
use crate::conformance::ledger_state;
use crate::handler::{Ledger, Script};

const MESSAGES: usize = 2_500;

/// 4 workers over 2,500 stored messages (the run with a killed worker process is
/// `killed_worker_process_loses_nothing`), a tenth of them received twice and a tenth of the
/// handler calls failing at random (retried): every effect lands exactly once, every row done.
pub async fn workers_process_each_row_exactly_once<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (messages, expected) = super::stream("w", MESSAGES, 3, 0.1, None);
    enqueue_all(&db, messages, 8).await;
    assert_eq!(
        with_status(&db, "pending").await,
        MESSAGES as i64,
        "duplicates were not stored twice"
    );
    let handler = Ledger::<B>::default();
    let config = WorkerConfig::default().batch_size(100).max_attempts(50);
    let workers: Vec<Worker<_, _>> = (0..4)
        .map(|_| worker(&db, config.clone(), &handler))
        .collect();
    drain(&db, &workers).await;
    assert_eq!(ledger_state(&db).await, (MESSAGES as i64, expected));
    assert_eq!(with_status(&db, "done").await, MESSAGES as i64);
    let retried = db
        .scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE attempts > 1")
        .await;
    assert!(
        retried > 0,
        "failures were injected, so some rows needed more than one attempt"
    );
    db.finish().await;
}

/// A permanent failure is dead at once; a row that always fails transiently is dead after
/// max_attempts; both keep their error, and their batch-mates are done.
pub async fn poison_rows_go_dead_after_max_attempts<B: Backend>(_test: &str) {
    let db = B::create().await;
    let inbox = inbox(&db);
    let fails = |how: &str| Script {
        fail: Some(how.into()),
        ..Script::default()
    };
    let messages = [
        fails("permanent").message("d-perm"),
        fails("transient").message("d-trans"),
        fails("panic").message("d-panic"),
        Script {
            amount: 5,
            ..Script::default()
        }
        .message("d-ok"),
        inboxed_core::Envelope::new(
            inboxed_core::MessageId::new("d-garbage").unwrap(),
            b"{no".to_vec(),
        ),
    ];
    for m in &messages {
        inbox.store(m).await.unwrap();
    }
    let handler = Ledger::<B>::default();
    let w = worker(
        &db,
        WorkerConfig::default().batch_size(10).max_attempts(3),
        &handler,
    );
    drain(&db, std::slice::from_ref(&w)).await;
    assert_eq!(
        ledger_state(&db).await,
        (1, 5),
        "the good batch-mate committed, the failures did not"
    );
    assert_eq!(with_status(&db, "dead").await, 4);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE message_id IN ('d-perm', 'd-garbage') AND status = 'dead' AND attempts = 1").await,
        2,
        "permanent failures (and undecodable payloads) are dead at the first attempt"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE message_id IN ('d-trans', 'd-panic') AND status = 'dead' AND attempts = 3 AND last_error IS NOT NULL").await,
        2
    );
    db.finish().await;
}

/// An idle worker is woken as soon as a row is stored: with a 30 s poll interval, rows stored
/// one by one are still processed within seconds. A worker on a clone of the receipt's store
/// (the same process) is woken directly, on both engines; a worker on a store of its own (as
/// in another process) through PostgreSQL `LISTEN/NOTIFY`. SQLite and MySQL have no
/// notifications; there the case checks that such a worker is offered none, so it polls.
pub async fn stored_rows_wake_idle_workers<B: Backend>(_test: &str) {
    use inboxed_core::inbox::store::InboxStore;

    let db = B::create().await;
    let handler = Ledger::<B>::default();
    // Polling alone would take 15 s or more per row.
    let config = WorkerConfig::default()
        .concurrency(2)
        .poll_interval(std::time::Duration::from_secs(30));
    let local = worker(&db, config.clone(), &handler);
    let rows = picked_up_one_by_one(&db, local, "local", 0).await;
    assert_eq!(rows, 5, "in-process wake-ups");
    let other = B::attach(&db.locator).await;
    if !B::NOTIFIES {
        let wake = std::sync::Arc::new(tokio::sync::Notify::new());
        let consumer = crate::conformance::ledger();
        assert!(other.subscribe(&consumer, wake).await.unwrap().is_none());
        return db.finish().await;
    }
    let remote = Worker::new(other, crate::conformance::ledger(), handler.clone(), config);
    let rows = picked_up_one_by_one(&db, remote, "remote", 5).await;
    assert_eq!(rows, 5, "wake-ups through the database");
    assert_eq!(ledger_state(&db).await, (10, 10));
    db.finish().await;
}

/// Runs `w` while storing five rows one at a time through the test
/// database's own store, each of which must be applied within 5 s. Returns how many were.
async fn picked_up_one_by_one<B: Backend>(
    db: &crate::backend::TestDb<B>,
    w: Worker<B::Store, Ledger<B>>,
    prefix: &str,
    before: i64,
) -> i64 {
    use std::time::{Duration, Instant};

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let w = w.clone();
        tokio::spawn(async move {
            w.run(async {
                let _ = stopped.await;
            })
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await; // the workers are idle and waiting
    let inbox = inbox(db);
    for i in 0..5 {
        let started = Instant::now();
        let msg = Script {
            amount: 1,
            ..Script::default()
        }
        .message(&format!("{prefix}-{i}"));
        inbox.store(&msg).await.unwrap();
        while ledger_state(db).await.0 < before + i + 1 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "row {prefix}-{i} not picked up: no wake-up"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let _ = stop.send(());
    running.await.unwrap().unwrap();
    ledger_state(db).await.0 - before
}

/// Lock-held mode (PostgreSQL): 4 workers each lock a batch, run its handlers and settle it in
/// one transaction; with duplicates and random failures every effect lands once. A row whose
/// claims keep dying before their commit (locked, counted, rolled back: what a killed worker
/// leaves) goes dead after max_attempts without its handler running again. SQLite has no row
/// locks: there the mode is refused with a typed error and nothing changes.
pub async fn lock_held_mode_processes_exactly_once<B: Backend>(_test: &str) {
    use inboxed_core::Store;
    use inboxed_core::inbox::ClaimMode;
    use inboxed_core::inbox::store::{InboxStore, LockBatchParams};

    let db = B::create().await;
    let handler = Ledger::<B>::default();
    let locked = WorkerConfig::default()
        .claim_mode(ClaimMode::LockHeld)
        .batch_size(50)
        .max_attempts(50);
    if B::SERIAL_WRITERS {
        inbox(&db)
            .store(&Script::default().message("lh-1"))
            .await
            .unwrap();
        let err = worker(&db, locked, &handler).run_once().await.unwrap_err();
        assert!(err.to_string().contains("not supported"), "{err}");
        assert_eq!(with_status(&db, "pending").await, 1);
        return db.finish().await;
    }
    let (messages, expected) = super::stream("lh", 2_000, 9, 0.1, None);
    enqueue_all(&db, messages, 8).await;
    let workers: Vec<Worker<_, _>> = (0..4)
        .map(|_| worker(&db, locked.clone(), &handler))
        .collect();
    drain(&db, &workers).await;
    assert_eq!(ledger_state(&db).await, (2_000, expected));
    assert_eq!(with_status(&db, "done").await, 2_000);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_attempts").await,
        0,
        "settled rows forget their counters"
    );

    // Claims that die before their commit, three times: the fourth claim finds it dead.
    inbox(&db)
        .store(
            &Script {
                amount: 1_000,
                ..Script::default()
            }
            .message("lh-crash"),
        )
        .await
        .unwrap();
    let consumer = crate::conformance::ledger();
    for _ in 0..3 {
        let mut tx = db
            .store
            .begin(&inboxed_core::store::BeginParams::default())
            .await
            .unwrap();
        let params = LockBatchParams {
            consumer: &consumer,
            limit: 10,
            now: None,
            ordered: false,
            park: true,
        };
        let rows = db.store.lock_batch(&mut tx, &params).await.unwrap();
        assert_eq!(rows.len(), 1);
        db.store
            .count_attempts(&consumer, &["lh-crash".to_owned()])
            .await
            .unwrap();
        tx.rollback().await.unwrap(); // the worker dies here; its locks go with its connection
    }
    let calls = handler.calls();
    let strict = WorkerConfig::default()
        .claim_mode(ClaimMode::LockHeld)
        .max_attempts(3);
    let report = worker(&db, strict, &handler).run_once().await.unwrap();
    assert_eq!((report.claimed, report.dead), (1, 1));
    assert_eq!(
        handler.calls(),
        calls,
        "a row that kept killing its worker does not run again"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE message_id = 'lh-crash' AND status = 'dead' AND attempts = 4").await,
        1
    );
    assert_eq!(ledger_state(&db).await, (2_000, expected));
    db.finish().await;
}

/// A row whose handler succeeds but whose COMMIT always fails (a deferred foreign key): its
/// rows run one per transaction, so only the culprit's commit fails; it spends its attempts
/// and goes dead, naming the failed transaction, and its nine batch-mates are done.
pub async fn batch_whose_commit_fails_isolates_the_culprit<B: Backend>(_test: &str) {
    let db = B::create().await;
    for i in 1..=10 {
        let script = Script {
            amount: i,
            commit_fails: i == 4,
            ..Script::default()
        };
        inbox(&db)
            .store(&script.message(&format!("cf-{i}")))
            .await
            .unwrap();
    }
    let handler = Ledger::<B>::default();
    let w = worker(
        &db,
        WorkerConfig::default().batch_size(10).max_attempts(3),
        &handler,
    );
    drain(&db, std::slice::from_ref(&w)).await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE message_id = 'cf-4' AND status = 'dead' AND last_error LIKE 'the row''s transaction failed%'").await,
        1
    );
    assert_eq!(with_status(&db, "done").await, 9);
    assert_eq!(ledger_state(&db).await, (9, 55 - 4));
    db.finish().await;
}

/// A row whose handler asks to be retried later (`HandlerError::retry_after`: a 429 with
/// `Retry-After`, a lock it saw held) comes back after that delay with its attempts as they
/// were, in both claim modes where the engine has them: five asks 300 ms apart under
/// `max_attempts(2)`, then applied once, nothing dead; charged, the third claim would find it
/// out of attempts. (A lock-held claim runs the row twice, in its batch and then alone, so it
/// waits twice, not five times.)
pub async fn a_row_asked_to_retry_later_keeps_its_attempts<B: Backend>(_test: &str) {
    use inboxed_core::inbox::ClaimMode;
    use std::time::{Duration, Instant};

    let db = B::create().await;
    let mut modes = vec![(ClaimMode::Lease, 5)];
    if !B::SERIAL_WRITERS {
        modes.push((ClaimMode::LockHeld, 2));
    }
    for (round, (mode, waits)) in modes.into_iter().enumerate() {
        let handler = Ledger::<B>::default();
        let asks = Script {
            fail_first: 5,
            retry_after_ms: 300,
            ..Script::default()
        };
        inbox(&db)
            .store(&asks.message(&format!("later-{round}")))
            .await
            .unwrap();
        let config = WorkerConfig::default().claim_mode(mode).max_attempts(2);
        let w = worker(&db, config, &handler);
        let started = Instant::now();
        let applied = i64::try_from(round + 1).unwrap();
        while ledger_state(&db).await.0 < applied {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{mode:?}: not applied; {} calls",
                handler.calls()
            );
            assert_eq!(with_status(&db, "dead").await, 0, "{mode:?}");
            w.run_once().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            started.elapsed() >= Duration::from_millis(300 * waits),
            "{mode:?}: each ask waited its 300 ms: {:?}",
            started.elapsed()
        );
        assert_eq!(handler.calls(), 6, "{mode:?}");
        assert_eq!(with_status(&db, "dead").await, 0, "{mode:?}");
    }
    db.finish().await;
}
