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

/// A batch receipt gives each message the outcome a single receipt would: new keys stored in
/// arrival order (their ids increase with their positions), a key stored before a duplicate or
/// a conflict, a key given twice in the batch stored once (its second copy a duplicate, or a
/// conflict when its payload differs), conflicts dead-lettered; workers then apply each stored
/// row once. Concurrent batches sharing keys and aggregates store each key once, without
/// deadlocking on their aggregate locks.
pub async fn batch_receipt_stores_each_key_once<B: Backend>(_test: &str) {
    let db = B::create().await;
    let inbox = inbox(&db);
    assert!(matches!(
        inbox.store(&credit("b-old", 3)).await.unwrap(),
        Enqueued::Stored { .. }
    ));
    let batch = vec![
        credit("b-1", 1).with_aggregate("acct-1"),
        credit("b-old", 3),
        credit("b-2", 2).with_aggregate("acct-1"),
        credit("b-old", 4),
        credit("b-1", 1),
        credit("b-2", 9),
        credit("b-3", 5),
    ];
    let outcomes = inbox.store_many(&batch).await.unwrap();
    let ids: Vec<i64> = outcomes
        .iter()
        .filter_map(|o| match o {
            Enqueued::Stored { id } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 3, "{outcomes:?}");
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids follow arrival order: {ids:?}"
    );
    assert!(matches!(outcomes[0], Enqueued::Stored { .. }));
    assert_eq!(
        outcomes[1],
        Enqueued::Duplicate,
        "stored before, same payload"
    );
    assert!(matches!(outcomes[2], Enqueued::Stored { .. }));
    assert!(
        matches!(outcomes[3], Enqueued::Conflict { .. }),
        "stored before, other payload"
    );
    assert_eq!(
        outcomes[4],
        Enqueued::Duplicate,
        "earlier in the batch, same payload"
    );
    assert!(
        matches!(outcomes[5], Enqueued::Conflict { .. }),
        "earlier in the batch, other payload"
    );
    assert!(matches!(outcomes[6], Enqueued::Stored { .. }));
    assert!(inbox.store_many(&[]).await.unwrap().is_empty());
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages")
            .await,
        4
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'conflict'")
            .await,
        2
    );

    // Concurrent batches over the same keys and aggregates, in opposite orders.
    let messages: Vec<_> = (0..200)
        .map(|i| credit(&format!("c-{i}"), 1).with_aggregate(format!("acct-{}", i % 7)))
        .collect();
    let mut tasks = Vec::new();
    for round in 0..4 {
        let (inbox, mut part) = (inbox.clone(), messages.clone());
        if round % 2 == 1 {
            part.reverse();
        }
        tasks.push(tokio::spawn(async move {
            let mut stored = 0;
            for chunk in part.chunks(50) {
                let outcomes = inbox.store_many(chunk).await.expect("a batch receipt");
                stored += outcomes
                    .iter()
                    .filter(|o| matches!(o, Enqueued::Stored { .. }))
                    .count();
            }
            stored
        }));
    }
    let mut stored = 0;
    for task in tasks {
        stored += task.await.unwrap();
    }
    assert_eq!(stored, 200, "each key stored by one batch only");
    let handler = Ledger::<B>::default();
    drain(&db, &[worker(&db, WorkerConfig::default(), &handler)]).await;
    assert_eq!(
        ledger_state(&db).await,
        (204, 3 + 1 + 2 + 5 + 200),
        "each stored row applied once"
    );
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

/// The headers a message arrived with are stored with its row, by a receipt and by a batch
/// receipt, and a worker's claim hands them back byte for byte: text, bytes that are not UTF-8,
/// a NUL, a name given twice, in order; a message without headers stores none.
pub async fn stored_rows_keep_their_headers<B: Backend>(_test: &str) {
    use inboxed_core::Headers;
    use inboxed_core::inbox::store::{ClaimBatchParams, ClaimToken, InboxStore};
    let db = B::create().await;
    let inbox = inbox(&db);
    let headers = Headers::new()
        .with(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .with("bin", vec![0xff, 0x00, b'a'])
        .with("nul", "a\0b")
        .with("bin", "again");
    inbox
        .store(&credit("h-1", 1).with_headers(headers.clone()))
        .await
        .unwrap();
    inbox
        .store_many(&[
            credit("h-2", 1).with_headers(headers.clone()),
            credit("h-3", 1),
        ])
        .await
        .unwrap();
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE headers IS NULL")
            .await,
        1,
        "a message without headers stores none"
    );
    let consumer = crate::conformance::ledger();
    let token = ClaimToken::random();
    let rows = db
        .store
        .claim_batch(&ClaimBatchParams {
            consumer: &consumer,
            worker: "headers",
            token: &token,
            limit: 10,
            lease: Duration::from_secs(30),
            now: None,
            ordered: false,
            park: false,
        })
        .await
        .unwrap();
    let mut seen: Vec<(String, Headers)> = rows
        .iter()
        .map(|r| {
            (
                r.envelope.id().as_str().to_owned(),
                r.envelope.headers().clone(),
            )
        })
        .collect();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        [
            ("h-1".to_owned(), headers.clone()),
            ("h-2".to_owned(), headers),
            ("h-3".to_owned(), Headers::new()),
        ]
    );
    db.finish().await;
}
