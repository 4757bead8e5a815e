//! The settling statement's check: a message whose transaction the server rolled back under
//! a handler that swallowed the error is not acked.

use super::*;

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId, Outcome, Processor};
use tokio::sync::{Mutex, mpsc, oneshot};

/// Locks `hot` rows 1 then 2 (the second a deadlock when the test holds 2 and waits for 1),
/// then writes the ledger row, swallowing every error as a careless handler would (and
/// reporting it to the test). Without turns it just writes the ledger row.
#[derive(Clone)]
struct Careless {
    turns: Arc<Mutex<Option<Turns>>>,
    swallowed: mpsc::UnboundedSender<String>,
}

impl Handler<sqlx::MySql> for Careless {
    async fn handle(&self, msg: &Envelope, conn: &mut MySqlConnection) -> Result<(), HandlerError> {
        let turns = self.turns.lock().await.take();
        if let Some(turns) = turns
            && let Err(e) = turns.play(conn).await?
        {
            let _ = self
                .swallowed
                .send(StoreError::from_sqlx(e).code().unwrap_or_default());
        }
        let written = sqlx::query("INSERT INTO ledger VALUES (?, 1)")
            .bind(msg.id().as_str())
            .execute(&mut *conn)
            .await;
        if let Err(e) = written {
            let _ = self
                .swallowed
                .send(StoreError::from_sqlx(e).code().unwrap_or_default());
        }
        Ok(())
    }
}

/// InnoDB rolls a deadlock victim's whole transaction back, claim included; a handler that
/// swallows the error and carries on would, before the check, have the message acked with
/// neither its claim nor the effect it made before the deadlock: lost. The processor reports
/// a transient failure instead, and the redelivery processes the message whole. What the
/// careless handler wrote after the deadlock committed on its own (no MySQL setting stops it
/// without risking worse; clear_attempts.sql says why): the ledger shows it, as the docs do.
#[tokio::test]
async fn a_handler_that_swallows_a_deadlock_is_not_acked() {
    let db = TestDb::new().await;
    inboxed_core::Store::migrate(&db.store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    deadlock_tables(&db).await;
    let (locked_tx, locked_rx) = oneshot::channel();
    let (go_tx, go_rx) = oneshot::channel();
    let (swallowed_tx, mut swallowed_rx) = mpsc::unbounded_channel();
    let handler = Careless {
        turns: Arc::new(Mutex::new(Some(Turns {
            locked: locked_tx,
            go: go_rx,
        }))),
        swallowed: swallowed_tx,
    };
    let consumer = ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}"));
    let p = Processor::new(db.store.clone(), consumer, handler);
    let id = MessageId::new("m-deadlock").unwrap_or_else(|e| panic!("{e}"));
    let msg = Envelope::new(id, b"{}".to_vec());
    let run = {
        let (p, msg) = (p.clone(), msg.clone());
        tokio::spawn(async move { p.process(&msg, Some(1)).await })
    };
    let result = deadlock_against(&db, locked_rx, go_tx, run).await;
    assert_eq!(swallowed_rx.recv().await.as_deref(), Some("1213"));
    let err = result.expect_err("a message whose transaction the server rolled back was acked");
    assert!(err.is_transient(), "{err:?}");
    assert!(
        inboxed_core::error::error_chain(&err).contains("propagate database errors"),
        "{err:?}"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger").await,
        1,
        "the write after the swallowed deadlock commits on its own"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_processed_messages")
            .await,
        0,
        "the claim went with the deadlock"
    );
    sqlx::query("DELETE FROM ledger")
        .execute(db.store.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        p.process(&msg, Some(2))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        Outcome::Processed
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM ledger").await, 1);
    db.finish().await;
}
