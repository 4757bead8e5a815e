//! The test kit's own cases: a correct handler passes every check, and each known-bad handler
//! is caught by the check that targets it, on every engine. A kit whose checks cannot fail
//! would be worth nothing; these show that each one can.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use inboxed_core::inbox::ClaimMode;
use inboxed_core::{Envelope, Handler, HandlerError, ProcessorConfig, Store};
use inboxed_testkit::{CheckFailure, Kit, KitConfig};

use crate::backend::{Backend, Conn, TestDb};
use crate::handler::{Ledger, Script, SecondConnection, credit};

/// The business tables back as every run starts.
const RESET: &str = "DELETE FROM ledger; UPDATE accounts SET balance = 0";

/// Ledger rows and account `a`'s balance, plus `sent` (effects outside the database, such as
/// emails, counted by a bad handler; 0 for the others).
type State = (i64, i64, i64);

/// A kit for `handler` on `db`, probing the ledger, the balance and `sent`.
fn kit<B: Backend, H: Handler<<B::Store as Store>::Db>>(
    db: &TestDb<B>,
    handler: H,
    sent: Arc<AtomicI64>,
) -> Kit<B::Store, H, State> {
    let emails = Arc::clone(&sent);
    Kit::new(
        db.store.clone(),
        handler,
        move |store: B::Store| {
            emails.store(0, Ordering::SeqCst);
            async move {
                B::execute(&store, RESET).await;
                Ok::<_, std::convert::Infallible>(())
            }
        },
        move |store: B::Store| {
            let sent = sent.load(Ordering::SeqCst);
            async move {
                Ok::<_, std::convert::Infallible>((
                    B::scalar(&store, "SELECT COUNT(*) FROM ledger").await,
                    B::scalar(&store, "SELECT balance FROM accounts WHERE id = 'a'").await,
                    sent,
                ))
            }
        },
    )
}

/// `k` with lock-held workers: each row's claim and work in one transaction that holds the
/// row's lock while the handler runs.
fn lock_held<S, H, T>(k: Kit<S, H, T>) -> Kit<S, H, T> {
    let mut config = k.config().clone();
    config.worker = config.worker.claim_mode(ClaimMode::LockHeld);
    k.with_config(config)
}

/// The named check's failure, shown in the test's output; a panic when the check passed.
fn caught(check: &str, result: Result<(), CheckFailure>) -> CheckFailure {
    let failure = result
        .err()
        .unwrap_or_else(|| panic!("`{check}` passed a bad handler"));
    assert_eq!(failure.check, check, "{failure}");
    assert!(
        failure.property != "the check could run",
        "the check broke instead of catching the handler: {failure}"
    );
    println!("{failure}");
    failure
}

/// The suite's ledger handler (each credit appended through `conn`) passes every check, and
/// so does its atomic credit under concurrent messages.
pub async fn testkit_passes_a_correct_handler<B: Backend>(_test: &str) {
    let db = B::create().await;
    let k = kit(&db, Ledger::<B>::default(), Arc::default());
    if let Err(report) = k.check_all(&credit("kit-good", 5)).await {
        panic!("{report}");
    }
    let msgs: Vec<Envelope> = (0..4).map(|i| credit(&format!("kit-m{i}"), 1)).collect();
    k.concurrent_messages(&msgs)
        .await
        .unwrap_or_else(|f| panic!("{f}"));
    k.batches(&msgs).await.unwrap_or_else(|f| panic!("{f}"));
    k.worker_batches(&msgs)
        .await
        .unwrap_or_else(|f| panic!("{f}"));
    if let Err(report) = k.check_all_workers(&credit("kit-good-w", 5)).await {
        panic!("{report}");
    }
    if !B::SERIAL_WRITERS {
        // The lock-held worker (SQLite has none): the row locked for the handler's length.
        if let Err(report) = lock_held(k)
            .check_all_workers(&credit("kit-good-l", 5))
            .await
        {
            panic!("lock-held: {report}");
        }
    }
    B::drop_db(db).await;
}

/// Caught by the crash before commit, the injected contention, the first holder's rollback,
/// and the poison check.
pub async fn testkit_catches_a_write_on_a_second_connection<B: Backend>(_test: &str) {
    let db = B::create().await;
    let handler = SecondConnection::<B> {
        store: db.store.clone(),
    };
    let k = kit(&db, handler, Arc::default());
    let msg = credit("kit-second", 1);
    if B::SERIAL_WRITERS {
        // One writer at a time: the second connection waits for the handler's own
        // transaction, which waits for the handler. The deadline ends each call; the check
        // fails on the first plain delivery, saying so.
        let mut config = KitConfig::default();
        config.processor = ProcessorConfig::default()
            .handler_timeout(std::time::Duration::from_millis(300))
            .max_attempts(2);
        let k = k.with_config(config);
        let failure = k
            .crash_before_commit(&msg)
            .await
            .err()
            .unwrap_or_else(|| panic!("a handler that waits on itself passed"));
        assert!(failure.actual.contains("did not process"), "{failure}");
        println!("{failure}");
        B::drop_db(db).await;
        return;
    }
    caught("crash_before_commit", k.crash_before_commit(&msg).await);
    caught("contention", k.contention(&msg).await);
    caught(
        "first_holder_rolls_back",
        k.first_holder_rolls_back(&msg).await,
    );
    caught("poison", k.poison(&msg).await);
    caught(
        "worker_crash_before_commit",
        k.worker_crash_before_commit(&msg).await,
    );
    caught("worker_lease_expires", k.worker_lease_expires(&msg).await);
    caught("worker_poison", k.worker_poison(&msg).await);
    k.sequential_duplicates(&msg)
        .await
        .unwrap_or_else(|f| panic!("plain duplicates do not show it: {f}"));
    // Lock-held workers: the killed worker's transaction rolls back, its own commit stays.
    let k = lock_held(k);
    caught(
        "worker_crash_before_commit",
        k.worker_crash_before_commit(&msg).await,
    );
    caught("worker_poison", k.worker_poison(&msg).await);
    k.sequential_duplicates(&msg)
        .await
        .unwrap_or_else(|f| panic!("plain duplicates do not show it: {f}"));
    B::drop_db(db).await;
}

/// Appends its credit through `conn`, then commits the transaction itself.
struct CommitsItself<B>(std::marker::PhantomData<fn() -> B>);

impl<B: Backend> Handler<<B::Store as Store>::Db> for CommitsItself<B> {
    async fn handle(&self, msg: &Envelope, conn: &mut Conn<B>) -> Result<(), HandlerError> {
        B::ledger_insert(conn, msg.id().as_str(), "a", 1).await?;
        B::run_on(conn, "COMMIT").await?;
        Ok(())
    }
}

/// Caught by the poison check: the claim committed with the handler's own COMMIT, so the
/// message cannot end dead-lettered without effect.
pub async fn testkit_catches_a_handler_that_commits_itself<B: Backend>(_test: &str) {
    let db = B::create().await;
    let k = kit(
        &db,
        CommitsItself::<B>(std::marker::PhantomData),
        Arc::default(),
    );
    caught("poison", k.poison(&credit("kit-commits", 1)).await);
    B::drop_db(db).await;
}

/// Appends its credit through `conn`, and counts an email sent for each call (an effect no
/// transaction can take back).
struct Mailer<B> {
    sent: Arc<AtomicI64>,
    ledger: Ledger<B>,
}

impl<B: Backend> Handler<<B::Store as Store>::Db> for Mailer<B> {
    async fn handle(&self, msg: &Envelope, conn: &mut Conn<B>) -> Result<(), HandlerError> {
        self.ledger.handle(msg, conn).await?;
        self.sent.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Counting the delivery (an email per call) instead of the message: caught by the crash
/// before commit, the injected contention (not on SQLite), the poison check and the batch
/// check (through the trait's default `handle_batch`).
pub async fn testkit_catches_a_handler_that_counts_deliveries<B: Backend>(_test: &str) {
    let db = B::create().await;
    let sent = Arc::new(AtomicI64::new(0));
    let handler = Mailer::<B> {
        sent: Arc::clone(&sent),
        ledger: Ledger::default(),
    };
    let k = kit(&db, handler, sent);
    let msg = credit("kit-mailer", 1);
    caught("crash_before_commit", k.crash_before_commit(&msg).await);
    let contention = k.contention(&msg).await;
    if B::SERIAL_WRITERS {
        // SQLite: no conflict inside a transaction, nothing to inject, nothing to catch.
        contention.unwrap_or_else(|f| panic!("{f}"));
    } else {
        caught("contention", contention);
    }
    caught("poison", k.poison(&msg).await);
    caught(
        "worker_crash_before_commit",
        k.worker_crash_before_commit(&msg).await,
    );
    caught("worker_poison", k.worker_poison(&msg).await);
    let msgs: Vec<Envelope> = (0..3)
        .map(|i| credit(&format!("kit-mailer-b{i}"), 1))
        .collect();
    caught("batches", k.batches(&msgs).await);
    caught("worker_batches", k.worker_batches(&msgs).await);
    let lease = k.worker_lease_expires(&msg).await;
    if B::SERIAL_WRITERS {
        // The running handler holds the write lock: nothing takes its row, it completes once.
        lease.unwrap_or_else(|f| panic!("{f}"));
    } else {
        caught("worker_lease_expires", lease);
    }
    B::drop_db(db).await;
}

/// A read-modify-write of the balance without a lock (`Script::rmw`), holding its transaction
/// a little after the write: concurrent messages lose each other's updates under READ
/// COMMITTED (PostgreSQL, MySQL); SQLite runs one writer at a time, so there the same handler
/// is correct and the check passes it.
pub async fn testkit_catches_a_lost_update<B: Backend>(_test: &str) {
    let db = B::create().await;
    let k = kit(&db, Ledger::<B>::default(), Arc::default());
    let msgs: Vec<Envelope> = (0..4)
        .map(|i| {
            Script {
                rmw: true,
                sleep_ms: 50,
                ..Script::default()
            }
            .message(&format!("kit-rmw-{i}"))
        })
        .collect();
    let result = k.concurrent_messages(&msgs).await;
    if B::SERIAL_WRITERS {
        result.unwrap_or_else(|f| panic!("one writer at a time loses no update: {f}"));
    } else {
        caught("concurrent_messages", result);
    }
    B::drop_db(db).await;
}

/// A correct `handle` and a `handle_batch` override that writes its rows through a
/// transaction of its own on a second connection: only a check through `handle_batch` sees it.
struct BatchOnSecondConnection<B: Backend> {
    ledger: Ledger<B>,
    second: SecondConnection<B>,
}

impl<B: Backend> Handler<<B::Store as Store>::Db> for BatchOnSecondConnection<B> {
    const BATCHES: bool = true;

    async fn handle(&self, msg: &Envelope, conn: &mut Conn<B>) -> Result<(), HandlerError> {
        self.ledger.handle(msg, conn).await
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut Conn<B>,
    ) -> Result<(), HandlerError> {
        for msg in msgs {
            self.second.handle(msg, conn).await?;
        }
        Ok(())
    }
}

/// The bad override passes every single-message check (they call `handle`) and is caught by
/// the batch checks, through the processor and through a worker. Not on SQLite: there the second connection waits for the write lock the
/// batch's own transaction holds, the batch fails, and the messages are redone by the correct
/// `handle`, so nothing is doubled to catch.
pub async fn testkit_catches_a_batch_override_on_a_second_connection<B: Backend>(_test: &str) {
    if B::SERIAL_WRITERS {
        return;
    }
    let db = B::create().await;
    let handler = BatchOnSecondConnection::<B> {
        ledger: Ledger::default(),
        second: SecondConnection {
            store: db.store.clone(),
        },
    };
    let k = kit(&db, handler, Arc::default());
    if let Err(report) = k.check_all(&credit("kit-batch", 1)).await {
        panic!("the single-message checks do not call handle_batch: {report}");
    }
    let msgs: Vec<Envelope> = (0..3)
        .map(|i| credit(&format!("kit-batch-{i}"), 1))
        .collect();
    caught("batches", k.batches(&msgs).await);
    // A worker runs the override for a batch of rows it claims.
    caught("worker_batches", k.worker_batches(&msgs).await);
    B::drop_db(db).await;
}
