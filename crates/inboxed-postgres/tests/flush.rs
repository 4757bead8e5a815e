//! Wake-ups. `Inbox::flush`: a producer that stores, flushes and closes its pool at once still
//! wakes the workers (the `NOTIFY` is sent after the receipt returns, by the inbox's notifier
//! task; a pool closed under it failed that send and logged a failed wake-up). The outbox: one
//! notification per writing transaction, none from a quiet outbox.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};

use inboxed_core::ConsumerName;
use inboxed_core::Store;
use inboxed_core::inbox::Inbox;
use inboxed_core::outbox::{Outbox, OutgoingMessage};
use inboxed_core::store::BeginParams;
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

/// A transaction of three writes and a `write_many` of ten notifies once, at its commit; a
/// rolled-back one and a quiet outbox's do not.
#[tokio::test]
async fn outbox_writes_notify_once_per_transaction_unless_quiet() {
    let db = Pg::create().await;
    let mut listener = PgListener::connect(&db.locator).await.unwrap();
    listener.listen("inboxed_outbox").await.unwrap();
    let messages: Vec<OutgoingMessage> = (0..10_u8)
        .map(|i| OutgoingMessage::new("orders", vec![i]))
        .collect();
    let write = |outbox: Outbox<PgStore>, commit: bool| {
        let (store, messages) = (db.store.clone(), messages.clone());
        async move {
            let mut tx = store.begin(&BeginParams::default()).await.unwrap();
            for m in &messages[..3] {
                outbox.write(&mut tx, m).await.unwrap();
            }
            outbox.write_many(&mut tx, &messages).await.unwrap();
            if commit {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
        }
    };
    write(Outbox::new(db.store.clone()), true).await;
    tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("the commit wakes the relays")
        .unwrap();
    silent(&mut listener, "once for the whole transaction").await;
    write(Outbox::new(db.store.clone()), false).await;
    write(Outbox::new(db.store.clone()).quiet(), true).await;
    silent(
        &mut listener,
        "neither a rollback nor a quiet outbox notifies",
    )
    .await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_messages")
            .await,
        26,
        "both committed transactions wrote their 13 rows"
    );
    db.finish().await;
}

/// No notification arrives within half a second.
async fn silent(listener: &mut PgListener, why: &str) {
    let heard = tokio::time::timeout(Duration::from_millis(500), listener.recv()).await;
    assert!(heard.is_err(), "{why}: {heard:?}");
}
