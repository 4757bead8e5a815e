//! The processor on tokio-postgres: the same guarantee as on sqlx, on the same tables, with
//! the claim sent behind the `BEGIN` and the settling statement behind the `COMMIT`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Outcome, Processor, ResultExt};
use inboxed_postgres::tokio_pg::{Connection, TokioPgStore, TokioPostgres};
use inboxed_test::handler::{Script, credit};
use inboxed_test::{Backend, Pg, TestDb};

/// Appends a ledger row through tokio-postgres, then does what the script says.
#[derive(Debug, Default, Clone)]
struct Ledger {
    calls: Arc<AtomicU32>,
}

impl Handler<TokioPostgres> for Ledger {
    async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        let calls = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let script: Script = msg.json().permanent()?;
        conn.execute(
            "INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, $3)",
            &[&msg.id().as_str(), &script.account, &script.amount],
        )
        .await?;
        if script.swallow {
            // A handler bug: a failed statement whose error is dropped.
            let _ = conn.execute("SELECT 1 / 0", &[]).await;
        }
        if calls <= script.fail_first {
            return Err(HandlerError::transient("scripted failure"));
        }
        if script.sleep_ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(script.sleep_ms)).await;
        }
        Ok(())
    }
}

async fn store(db: &TestDb<Pg>) -> TokioPgStore {
    // The locator's query holds sqlx's own options, which tokio-postgres does not know.
    let url = db.locator.split('?').next().unwrap();
    let store = TokioPgStore::connect(url, 12).unwrap();
    // The test database is migrated through sqlx already: the same migrations, recorded in
    // the same table, so nothing is left to apply.
    assert_eq!(store.migrate().await.unwrap(), Vec::<i64>::new());
    store
}

fn processor(store: &TokioPgStore, handler: Ledger) -> Processor<TokioPgStore, Ledger> {
    Processor::new(store.clone(), ConsumerName::new("ledger").unwrap(), handler)
}

/// A message is processed once and its redelivery is a duplicate: one ledger row.
#[tokio::test]
async fn a_message_is_processed_once_and_its_redelivery_is_a_duplicate() {
    let db = Pg::create().await;
    let store = store(&db).await;
    let p = processor(&store, Ledger::default());
    p.ensure_ready().await.unwrap();
    let msg = credit("tp-1", 7);
    assert_eq!(p.process(&msg, None).await.unwrap(), Outcome::Processed);
    assert_eq!(p.process(&msg, None).await.unwrap(), Outcome::Duplicate);
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    assert_eq!(db.scalar("SELECT sum(amount)::int8 FROM ledger").await, 7);
    db.finish().await;
}

/// A handler's failure rolls its row and the claim back together: the next delivery runs it
/// again and only that one's row stays.
#[tokio::test]
async fn a_failed_handler_leaves_nothing_and_runs_again() {
    let db = Pg::create().await;
    let store = store(&db).await;
    let p = processor(&store, Ledger::default());
    p.ensure_ready().await.unwrap();
    let msg = Script {
        amount: 3,
        fail_first: 1,
        ..Script::default()
    }
    .message("tp-2");
    assert!(p.process(&msg, None).await.is_err());
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 0);
    assert_eq!(p.process(&msg, None).await.unwrap(), Outcome::Processed);
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    db.finish().await;
}

/// A handler that drops a failed statement's error and returns `Ok` is not acked: the
/// settling statement, sent with the `COMMIT`, finds the transaction aborted, and nothing
/// stays (the `COMMIT` behind it only rolled back).
#[tokio::test]
async fn a_swallowed_failure_is_caught_by_the_settling_statement() {
    let db = Pg::create().await;
    let store = store(&db).await;
    let p = processor(&store, Ledger::default());
    p.ensure_ready().await.unwrap();
    let msg = Script {
        amount: 5,
        swallow: true,
        ..Script::default()
    }
    .message("tp-3");
    let err = p.process(&msg, None).await.unwrap_err();
    assert!(
        inboxed_core::error_chain(&err).contains("propagate database errors"),
        "{}",
        inboxed_core::error_chain(&err)
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 0);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        0
    );
    db.finish().await;
}

/// Concurrent deliveries of one message: one runs the handler, the others wait for its
/// claim and find it processed.
#[tokio::test]
async fn concurrent_duplicates_apply_once() {
    let db = Pg::create().await;
    let store = store(&db).await;
    let handler = Ledger::default();
    let p = processor(&store, handler.clone());
    p.ensure_ready().await.unwrap();
    let msg = Script {
        amount: 1,
        sleep_ms: 200,
        ..Script::default()
    }
    .message("tp-4");
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let (p, msg) = (p.clone(), msg.clone());
            tokio::spawn(async move { p.process(&msg, None).await.unwrap() })
        })
        .collect();
    let mut outcomes = Vec::new();
    for run in runs {
        outcomes.push(run.await.unwrap());
    }
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == Outcome::Processed)
            .count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1);
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    db.finish().await;
}

/// A caller that gives up while its `BEGIN` and claim are in flight (a key lock held
/// elsewhere makes them wait) leaves no session of the database inside a transaction: the
/// connection is closed, never handed back to the pool mid-transaction.
#[tokio::test]
async fn a_claim_given_up_in_flight_leaves_no_session_in_a_transaction() {
    use inboxed_postgres::key_lock::key_lock;

    let db = Pg::create().await;
    let store = store(&db).await;
    let p = processor(&store, Ledger::default());
    p.ensure_ready().await.unwrap();
    let consumer = ConsumerName::new("ledger").unwrap();
    let msg = credit("tp-5", 2);
    // The dead-letter path's exclusive lock on the key: the claim's shared lock waits for it.
    let mut holder = db.store.pool().begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(key_lock(&consumer, msg.id().as_str()))
        .execute(&mut *holder)
        .await
        .unwrap();
    let given_up =
        tokio::time::timeout(std::time::Duration::from_millis(300), p.process(&msg, None)).await;
    assert!(given_up.is_err(), "the claim waited for the key lock");
    holder.rollback().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let idle_in_transaction = db
        .scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
        .await;
    assert_eq!(idle_in_transaction, 0);
    // And the pool still serves: the message is processed once.
    assert_eq!(p.process(&msg, None).await.unwrap(), Outcome::Processed);
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    db.finish().await;
}

/// Writes a row behind a savepoint and undoes it, writes another and keeps it; or (with
/// `abandon`) leaves a savepoint neither released nor rolled back.
#[derive(Debug, Clone, Copy)]
struct Savepoints {
    abandon: bool,
}

impl Handler<TokioPostgres> for Savepoints {
    async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        let insert = "INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, 1)";
        let id = msg.id().as_str();
        let undone = conn.savepoint().await?;
        undone.execute(insert, &[&id, &"undone"]).await?;
        inboxed_core::driver::Transaction::rollback(undone).await?;
        let kept = conn.savepoint().await?;
        kept.execute(insert, &[&id, &"kept"]).await?;
        if self.abandon {
            drop(kept);
        } else {
            inboxed_core::driver::Transaction::commit(kept).await?;
        }
        Ok(())
    }
}

/// A savepoint rolled back undoes only its own work; one abandoned (neither released nor
/// rolled back) cannot be committed over: the message fails and nothing of it stays.
#[tokio::test]
async fn savepoints_undo_their_own_work_and_an_abandoned_one_fails_the_message() {
    let db = Pg::create().await;
    let store = store(&db).await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let p = Processor::new(
        store.clone(),
        consumer.clone(),
        Savepoints { abandon: false },
    );
    p.ensure_ready().await.unwrap();
    assert_eq!(
        p.process(&credit("tp-6", 1), None).await.unwrap(),
        Outcome::Processed
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE account = 'kept'")
            .await,
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);

    let abandoning = Processor::new(store, consumer, Savepoints { abandon: true });
    assert!(abandoning.process(&credit("tp-7", 1), None).await.is_err());
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE message_id = 'tp-7'")
            .await,
        0
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    db.finish().await;
}

/// A savepoint abandoned inside another that is then rolled back is undone with it: the
/// transaction commits what ran after (the lock-held worker rolls back a failed handler's
/// savepoint this way, whatever the handler left open inside it).
#[tokio::test]
async fn rolling_back_an_outer_savepoint_undoes_an_abandoned_inner_one() {
    let db = Pg::create().await;
    let store = store(&db).await;
    let mut tx = store.transaction().await.unwrap();
    let mut outer = tx.savepoint().await.unwrap();
    let inner = outer.savepoint().await.unwrap();
    inner
        .execute(
            "INSERT INTO ledger (message_id, account, amount) VALUES ('sp', 'inner', 1)",
            &[],
        )
        .await
        .unwrap();
    drop(inner);
    outer.rollback().await.unwrap();
    tx.execute(
        "INSERT INTO ledger (message_id, account, amount) VALUES ('sp', 'after', 1)",
        &[],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE account = 'after'")
            .await,
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    db.finish().await;
}
