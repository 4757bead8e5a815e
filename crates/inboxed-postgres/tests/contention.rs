//! Store-then-process with the defaults under contention: eight workers, each with the default
//! settings (four claim loops, batches of 50) and a handler with only `handle`, credit 4,000
//! messages to 20 accounts. With a batch's rows in one transaction, in arrival order, such
//! workers locked the same accounts in conflicting orders and deadlocked; with row groups that
//! shrink under contention the server counts no deadlock, and every message is credited once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use sqlx::{PgConnection, Postgres};

use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId};
use inboxed_test::{Backend, Pg};

struct Credit;

impl Handler<Postgres> for Credit {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        let account = std::str::from_utf8(msg.payload()).unwrap().to_owned();
        sqlx::query("UPDATE accounts SET balance = balance + 1 WHERE id = $1")
            .bind(account)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

async fn deadlocks(db: &inboxed_test::TestDb<Pg>) -> i64 {
    db.scalar("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        .await
}

#[tokio::test]
async fn default_workers_on_shared_rows_never_deadlock() {
    let db = Pg::create().await;
    sqlx::query("INSERT INTO accounts SELECT 'a' || g, 0 FROM generate_series(0, 19) g")
        .execute(db.store.pool())
        .await
        .unwrap();
    let consumer = ConsumerName::new("ledger").unwrap();
    let inbox = Inbox::new(db.store.clone(), consumer.clone());
    let messages: Vec<Envelope> = (0..4_000)
        .map(|i| {
            let id = MessageId::new(format!("c-{i}")).unwrap();
            Envelope::new(id, format!("a{}", fastrand::u32(0..20)).into_bytes())
        })
        .collect();
    for chunk in messages.chunks(500) {
        inbox.store_many(chunk).await.unwrap();
    }
    let before = deadlocks(&db).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let worker = Worker::new(
                db.store.clone(),
                consumer.clone(),
                Credit,
                WorkerConfig::default(),
            );
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                worker
                    .run(async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    })
                    .await
            })
        })
        .collect();
    for _ in 0..1_200 {
        if db
            .scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'done'")
            .await
            == 4_000
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.send(true).unwrap();
    for w in workers {
        w.await.unwrap().unwrap();
    }
    assert_eq!(
        db.scalar("SELECT CAST(sum(balance) AS BIGINT) FROM accounts")
            .await,
        4_000,
        "every message credited once"
    );
    assert_eq!(deadlocks(&db).await - before, 0, "no deadlock");
    db.finish().await;
}
