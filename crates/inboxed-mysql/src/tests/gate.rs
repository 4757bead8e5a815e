//! The batch gate: at most its slots are held at once, a slot comes free when its session
//! ends, and workers crowding a database run no more batches at once than `concurrency`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

use inboxed_core::engine::Engine;
use inboxed_core::inbox::store::InboxStore;
use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId};

/// Two slots, three loops: the third waits until a holder's session dies (a worker killed
/// holding a slot holds nothing back: here the server ends it), and a slot left is taken
/// again. The loop whose session died finds a new one at its next batch.
#[tokio::test]
async fn a_gate_holds_its_slots_and_frees_those_of_a_dead_session() {
    let db = TestDb::new().await;
    let gate = || {
        db.store
            .batch_gate(2)
            .unwrap_or_else(|| panic!("MySQL gates"))
    };
    let (a, b, c) = (gate(), gate(), gate());
    let first = a.enter().await.unwrap_or_else(|| panic!("a free slot"));
    let second = b.enter().await.unwrap_or_else(|| panic!("a free slot"));
    assert_ne!(first, second, "two loops, two slots");
    let mut third = Box::pin(c.enter());
    assert!(
        tokio::time::timeout(Duration::from_millis(800), third.as_mut())
            .await
            .is_err(),
        "both slots are held: the third loop waits"
    );
    // The session holding the first slot, found by its lock's name (gate_leave.sql's), ended
    // by the server as a killed process's would be.
    let holder_sql = db
        .store
        .queries()
        .gate_leave
        .replace("DO RELEASE_LOCK(", "SELECT IS_USED_LOCK(")
        .replace("$1", &first.to_string());
    let holder: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(holder_sql))
        .fetch_one(db.store.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    sqlx::query(sqlx::AssertSqlSafe(format!("KILL {holder}")))
        .execute(db.store.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let taken = tokio::time::timeout(Duration::from_secs(5), third)
        .await
        .unwrap_or_else(|_| panic!("the dead session's slot came free"));
    assert_eq!(taken, Some(first));
    b.leave(second);
    let again = tokio::time::timeout(Duration::from_secs(5), async {
        // Its first try finds its session dead (the batch runs ungated); the next, a new one.
        match a.enter().await {
            None => a.enter().await,
            entered => entered,
        }
    })
    .await
    .unwrap_or_else(|_| panic!("a slot left is free"));
    assert_eq!(again, Some(second));
    db.finish().await;
}

/// Counts the handler calls running at once, and credits each message to the ledger.
struct Crowd {
    running: Arc<AtomicU64>,
    most: Arc<AtomicU64>,
}

impl Handler<sqlx::MySql> for Crowd {
    async fn handle(&self, msg: &Envelope, conn: &mut MySqlConnection) -> Result<(), HandlerError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(2)).await;
        sqlx::query("INSERT INTO ledger (id, amount) VALUES (?, 1)")
            .bind(msg.id().as_str())
            .execute(&mut *conn)
            .await?;
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Six default workers of `concurrency` 2 on one database drain 240 messages; the most
/// handler calls seen running at once. Each message lands once in the ledger.
async fn crowd(db: &TestDb, adaptive: bool) -> u64 {
    inboxed_core::Store::migrate(&db.store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let consumer = ConsumerName::new("gated").unwrap_or_else(|e| panic!("{e}"));
    let (running, most) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    for _ in 0..6 {
        let handler = Crowd {
            running: Arc::clone(&running),
            most: Arc::clone(&most),
        };
        let config = WorkerConfig::default()
            .concurrency(2)
            .batch_size(5)
            .adaptive_concurrency(adaptive)
            .poll_interval(Duration::from_millis(20));
        let worker = Worker::new(db.store.clone(), consumer.clone(), handler, config);
        let mut stopped = stopped.clone();
        workers.push(tokio::spawn(async move {
            worker
                .run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
        }));
    }
    // Every worker registered and counted by the others (their count is a second old at most).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let inbox = Inbox::new(db.store.clone(), consumer);
    let messages: Vec<Envelope> = (0..240)
        .map(|i| {
            Envelope::new(
                MessageId::new(format!("m-{i}")).unwrap_or_else(|e| panic!("{e}")),
                b"{}".to_vec(),
            )
        })
        .collect();
    inbox
        .store_many(&messages)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..600 {
        if db.count("SELECT COUNT(*) FROM ledger").await == 240 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    for w in workers {
        w.await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger").await,
        240,
        "each message credited once"
    );
    most.load(Ordering::SeqCst)
}

/// Gated, six workers of two loops run two batches at once at the most (a batch runs its rows
/// one after another); without the gate (loops set by hand), the same check sees more, so it
/// is one that can fail.
#[tokio::test]
async fn crowded_workers_run_no_more_batches_at_once_than_concurrency() {
    let db = TestDb::new().await;
    let gated = crowd(&db, true).await;
    assert!(
        gated <= 2,
        "{gated} batches ran at once through a gate of 2"
    );
    db.finish().await;
    let db = TestDb::new().await;
    let ungated = crowd(&db, false).await;
    assert!(
        ungated > 2,
        "without the gate, six workers of two loops ran {ungated} batches at once at the most"
    );
    db.finish().await;
}
