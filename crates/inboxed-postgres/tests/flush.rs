//! `Inbox::flush`: a producer that stores, flushes and closes its pool at once still wakes the
//! workers (the `NOTIFY` is sent after the receipt returns, by the inbox's notifier task; a
//! pool closed under it failed that send and logged a failed wake-up).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};

use inboxed_core::ConsumerName;
use inboxed_core::inbox::Inbox;
use inboxed_postgres::PgStore;
use inboxed_test::{Backend, Pg, credit};

#[tokio::test]
async fn flush_sends_the_wake_up_before_the_pool_closes() {
    let db = Pg::create().await;
    let mut listener = PgListener::connect(&db.locator).await.unwrap();
    listener.listen("inboxed_inbox").await.unwrap();
    for i in 0..20 {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect(&db.locator)
            .await
            .unwrap();
        let inbox = Inbox::new(
            PgStore::new(pool.clone()),
            ConsumerName::new("ledger").unwrap(),
        );
        inbox.store(&credit(&format!("f-{i}"), 1)).await.unwrap();
        inbox.flush().await;
        pool.close().await;
        let woken = tokio::time::timeout(Duration::from_secs(5), listener.recv())
            .await
            .unwrap_or_else(|_| panic!("producer {i}: no wake-up reached the workers"))
            .unwrap();
        assert!(woken.payload().ends_with(":ledger"), "{}", woken.payload());
    }
    // Nothing pending: flush returns at once.
    let inbox = Inbox::new(db.store.clone(), ConsumerName::new("idle").unwrap());
    tokio::time::timeout(Duration::from_secs(1), inbox.flush())
        .await
        .expect("flush with nothing stored returns at once");
    db.finish().await;
}
