//! Receipt, replay with its audit, and retention of done rows.

use std::time::{Duration, SystemTime};

use inboxed_core::inbox::{Enqueued, Selector, WorkerConfig};

use super::{drain, inbox, with_status, worker};
use crate::backend::Backend;
use crate::conformance::ledger_state;
use crate::handler::{Ledger, Script, credit};

/// A receipt stores the raw message once; a redelivery is a duplicate; the same key with
/// another payload is a conflict that lands on the dead-letter path.
pub async fn receipt_stores_once_and_reports_conflicts<B: Backend>(_test: &str) {
    let db = B::create().await;
    let inbox = inbox(&db);
    let first = credit("r-1", 5).with_aggregate("acct-1");
    assert!(matches!(
        inbox.store(&first).await.unwrap(),
        Enqueued::Stored { .. }
    ));
    assert_eq!(inbox.store(&first).await.unwrap(), Enqueued::Duplicate);
    let other = credit("r-1", 6);
    assert!(matches!(
        inbox.store(&other).await.unwrap(),
        Enqueued::Conflict { .. }
    ));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages")
            .await,
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE aggregate_id = 'acct-1' AND status = 'pending'").await, 1);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'conflict'")
            .await,
        1
    );
    // Non-JSON bodies are stored as they are.
    let raw = inboxed_core::Envelope::new(
        inboxed_core::MessageId::new("r-raw").unwrap(),
        vec![0u8, 159, 146, 150],
    );
    assert!(matches!(
        inbox.store(&raw).await.unwrap(),
        Enqueued::Stored { .. }
    ));
    db.finish().await;
}

/// A replay resets dead rows only; a re-drive of done rows applies them again, deliberately;
/// both are written to the audit table.
pub async fn replay_and_audited_redrive<B: Backend>(_test: &str) {
    let db = B::create().await;
    let handler = Ledger::<B>::default();
    let w = worker(&db, WorkerConfig::default().batch_size(10), &handler);
    let inbox = inbox(&db);
    for i in 0..5 {
        inbox.store(&credit(&format!("p-{i}"), 1)).await.unwrap();
    }
    drain(&db, std::slice::from_ref(&w)).await;
    assert_eq!(ledger_state(&db).await, (5, 5));

    let none = inbox
        .replay(&Selector::all(), false, "ops@example", "nothing is dead")
        .await
        .unwrap();
    assert!(none.ids.is_empty());
    let ids: Vec<i64> = vec![1, 2];
    let redriven = inbox
        .replay(
            &Selector::ids(ids.clone()),
            true,
            "ops@example",
            "reapply after restore",
        )
        .await
        .unwrap();
    assert_eq!((redriven.ids.clone(), redriven.done_rows), (ids, 2));
    drain(&db, std::slice::from_ref(&w)).await;
    assert_eq!(
        ledger_state(&db).await,
        (7, 7),
        "a re-drive applies the effect again, on purpose"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_redrive_audit WHERE actor = 'ops@example' AND row_count = 2 AND done_count = 2").await,
        1
    );

    // A received-at window is exact to the millisecond: only the row received inside it.
    let dead = |id: &str| {
        Script {
            fail: Some("permanent".into()),
            ..Script::default()
        }
        .message(id)
    };
    let pause = || tokio::time::sleep(Duration::from_millis(20));
    let from = SystemTime::now();
    pause().await;
    inbox.store(&dead("win-a")).await.unwrap();
    pause().await;
    let before = SystemTime::now();
    pause().await;
    inbox.store(&dead("win-b")).await.unwrap();
    drain(&db, std::slice::from_ref(&w)).await;
    assert_eq!(with_status(&db, "dead").await, 2);
    let window = inbox
        .replay(
            &Selector::received_between(from, before),
            false,
            "ops",
            "window",
        )
        .await
        .unwrap();
    assert_eq!(window.ids.len(), 1, "only win-a was received in the window");
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE message_id = 'win-a' AND status = 'pending'").await, 1);
    db.finish().await;
}

/// Purging deletes done rows older than the cut-off, in batches, and nothing else.
pub async fn purge_removes_only_old_done_rows<B: Backend>(_test: &str) {
    let db = B::create().await;
    let handler = Ledger::<B>::default();
    let w = worker(&db, WorkerConfig::default().batch_size(10), &handler);
    let inbox = inbox(&db);
    for i in 0..10 {
        inbox.store(&credit(&format!("g-{i}"), 1)).await.unwrap();
    }
    drain(&db, std::slice::from_ref(&w)).await;
    inbox.store(&credit("g-pending", 1)).await.unwrap();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    assert_eq!(
        inbox.purge_done(an_hour_ago, 3).await.unwrap(),
        0,
        "nothing is that old"
    );
    let soon = SystemTime::now() + Duration::from_secs(60);
    assert_eq!(
        inbox.purge_done(soon, 3).await.unwrap(),
        10,
        "four batches of at most 3"
    );
    assert_eq!(
        (
            with_status(&db, "done").await,
            with_status(&db, "pending").await
        ),
        (0, 1)
    );
    db.finish().await;
}
