//! The leased batch's completion check: rows whose transaction InnoDB rolled back under a
//! handler that swallowed the error are not marked done outside it.

use super::*;

use inboxed_core::inbox::{Worker, WorkerConfig};
use inboxed_core::{Envelope, Handler, HandlerError};
use tokio::sync::{Mutex, oneshot};

/// Writes the message's effect first; its first call then locks `hot` rows 1 and 2 (the second
/// a deadlock) and swallows the error, as a careless handler would.
#[derive(Clone)]
struct EffectFirst {
    turns: Arc<Mutex<Option<Turns>>>,
}

impl Handler<sqlx::MySql> for EffectFirst {
    async fn handle(&self, msg: &Envelope, conn: &mut MySqlConnection) -> Result<(), HandlerError> {
        sqlx::query("INSERT INTO effects VALUES (?)")
            .bind(msg.id().as_str())
            .execute(&mut *conn)
            .await?;
        if let Some(turns) = self.turns.lock().await.take() {
            let _swallowed = turns.play(conn).await?;
        }
        Ok(())
    }
}

/// A leased batch of two rows in one transaction: the first row's effect, then the deadlock
/// that rolls everything back, swallowed; the second row's effect then commits on its own (no
/// MySQL setting stops that, docs/guarantees.md). The completion used to run on its own too:
/// both rows done, the first one's effect gone with the deadlock. Now the completion finds the
/// store's savepoint gone, the batch is redone a row at a time, and the first message's effect
/// stands once.
#[tokio::test]
async fn a_swallowed_deadlock_in_a_leased_batch_loses_no_row() {
    let db = TestDb::new().await;
    let consumer = two_stored_beside_a_deadlock(&db).await;
    let (locked_tx, locked_rx) = oneshot::channel();
    let (go_tx, go_rx) = oneshot::channel();
    let handler = EffectFirst {
        turns: Arc::new(Mutex::new(Some(Turns {
            locked: locked_tx,
            go: go_rx,
        }))),
    };
    let worker = Worker::new(
        db.store.clone(),
        consumer,
        handler,
        WorkerConfig::default().batch_size(10),
    );
    let run = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.run_once().await })
    };
    deadlock_against(&db, locked_rx, go_tx, run)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..5 {
        let report = worker.run_once().await.unwrap_or_else(|e| panic!("{e}"));
        if report.claimed == 0 {
            break;
        }
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_inbox_messages WHERE status = 'done'")
            .await,
        2
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM effects WHERE id = 'm-1'")
            .await,
        1,
        "the first message's effect went with the deadlock; its row must not be done without it"
    );
    db.finish().await;
}
