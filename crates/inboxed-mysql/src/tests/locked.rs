//! The lock-held batch when InnoDB ends its transaction under a handler (a deadlock victim
//! loses the whole transaction, the batch's savepoint with it): the batch stops there, as
//! contention, and runs whole later.

use super::*;

use inboxed_core::inbox::{ClaimMode, Worker, WorkerConfig};
use inboxed_core::{Envelope, Handler, HandlerError};
use tokio::sync::{Mutex, oneshot};

/// Writes one row of `effects` per message (the table has no key: a second effect shows). Its
/// first call locks `hot` rows 1 then 2, the second a deadlock; `swallow` carries on after it,
/// as a careless handler would, instead of propagating it.
#[derive(Clone)]
struct Effects {
    turns: Arc<Mutex<Option<Turns>>>,
    swallow: bool,
}

impl Handler<sqlx::MySql> for Effects {
    async fn handle(&self, msg: &Envelope, conn: &mut MySqlConnection) -> Result<(), HandlerError> {
        if let Some(turns) = self.turns.lock().await.take() {
            let second = turns.play(conn).await?;
            if !self.swallow {
                second?;
            }
        }
        sqlx::query("INSERT INTO effects VALUES (?)")
            .bind(msg.id().as_str())
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// Two stored messages and a lock-held worker whose batch handler deadlocks with the test's
/// transaction (made the heavier one, so that InnoDB picks the handler's as the victim).
/// Returns the first batch's result and the effects written by then; the caller then runs
/// the batch again.
async fn deadlocked_batch(
    db: &TestDb,
    swallow: bool,
) -> (
    Worker<MySqlStore, Effects>,
    Result<inboxed_core::inbox::BatchReport, inboxed_core::Error>,
    i64,
) {
    let consumer = two_stored_beside_a_deadlock(db).await;
    let (locked_tx, locked_rx) = oneshot::channel();
    let (go_tx, go_rx) = oneshot::channel();
    let handler = Effects {
        turns: Arc::new(Mutex::new(Some(Turns {
            locked: locked_tx,
            go: go_rx,
        }))),
        swallow,
    };
    let config = WorkerConfig::default()
        .claim_mode(ClaimMode::LockHeld)
        .batch_size(10);
    let worker = Worker::new(db.store.clone(), consumer, handler, config);
    let run = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.run_once().await })
    };
    let result = deadlock_against(db, locked_rx, go_tx, run).await;
    let effects = db.count("SELECT COUNT(*) FROM effects").await;
    (worker, result, effects)
}

/// Runs batches until one finds nothing; the rows done. The rows of a batch that did not settle
/// count as suspects (their attempt counters stayed) and run one at a time.
async fn drain(worker: &Worker<MySqlStore, Effects>) -> u64 {
    let mut done = 0;
    for _ in 0..5 {
        let report = worker.run_once().await.unwrap_or_else(|e| panic!("{e}"));
        if report.claimed == 0 {
            return done;
        }
        done += report.done;
    }
    panic!("the batch did not drain in 5 runs")
}

/// A handler that propagates its deadlock: the batch fails as transient contention (it was a
/// "database error" about a missing savepoint: `ROLLBACK TO SAVEPOINT` after InnoDB had rolled
/// everything back), nothing of it is left, and the next batch applies each message once.
#[tokio::test]
async fn a_deadlock_in_a_lock_held_batch_is_contention_and_the_batch_runs_again() {
    let db = TestDb::new().await;
    let (worker, result, effects) = deadlocked_batch(&db, false).await;
    let err = result.expect_err("the batch's transaction was rolled back");
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(effects, 0, "nothing of the victim's transaction stands");
    assert_eq!(drain(&worker).await, 2);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM effects").await,
        2,
        "each message once"
    );
    db.finish().await;
}

/// A handler that swallows its deadlock and returns Ok: what it wrote after the deadlock has
/// committed on its own (one effect per message: MySQL cannot stop it, docs/guarantees.md), but
/// the worker stops at the lost savepoint. It used to take the failed release for a failed
/// handler and run each row again, one by one, outside any transaction: two more effects that
/// committed on their own, and the rows settled outside the lock.
#[tokio::test]
async fn a_swallowed_deadlock_in_a_lock_held_batch_runs_nothing_more_outside_it() {
    let db = TestDb::new().await;
    let (worker, result, effects) = deadlocked_batch(&db, true).await;
    let err = result.expect_err("the batch's transaction was rolled back");
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(effects, 2, "only what ran before the worker saw the loss");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_inbox_messages WHERE status = 'pending'")
            .await,
        2,
        "the rows were not settled"
    );
    assert_eq!(drain(&worker).await, 2);
    db.finish().await;
}
