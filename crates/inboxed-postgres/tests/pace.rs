//! The worker's pace (adaptive concurrency) gives up nothing where more loops help: with a
//! handler whose rows wait on something else (a 10 ms sleep, as an HTTP call would), a worker
//! at the defaults starts with one claim loop and ends up running all four at once; every
//! message is credited once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::{PgConnection, Postgres};

use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId};
use inboxed_test::{Backend, Pg};

/// Credits the account, then waits 10 ms; counts how many of its calls overlap at most.
#[derive(Clone, Default)]
struct Waiting {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Handler<Postgres> for Waiting {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        let running = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(running, Ordering::SeqCst);
        sqlx::query("INSERT INTO ledger (message_id, account, amount) VALUES ($1, 'a', 1)")
            .bind(msg.id().as_str())
            .execute(&mut *conn)
            .await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn a_handler_that_waits_gets_every_loop() {
    let db = Pg::create().await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let inbox = Inbox::new(db.store.clone(), consumer.clone());
    let messages: Vec<Envelope> = (0..600)
        .map(|i| Envelope::new(MessageId::new(format!("w-{i}")).unwrap(), b"{}".to_vec()))
        .collect();
    inbox.store_many(&messages).await.unwrap();
    let handler = Waiting::default();
    let worker = Worker::new(
        db.store.clone(),
        consumer,
        handler.clone(),
        WorkerConfig::default().batch_size(10),
    );
    let pool = db.store.pool().clone();
    let drained = async move {
        loop {
            let left: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM inboxed_inbox_messages WHERE status <> 'done'",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            if left == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    worker.run(drained).await.unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&db).await,
        (600, 600)
    );
    assert_eq!(
        handler.most.load(Ordering::SeqCst),
        WorkerConfig::default().concurrency,
        "the waiting rows ran in every loop at once"
    );
    db.finish().await;
}
