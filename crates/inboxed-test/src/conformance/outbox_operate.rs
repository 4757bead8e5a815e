//! What an operator does with the outbox: its figures, its rows listed and loaded, and dead
//! rows retried or discarded under a filter, each change audited and a dry run changing
//! nothing.

use std::time::Duration;

use inboxed_core::Store;
use inboxed_core::driver::Transaction as _;
use inboxed_core::observe::ObserveStore;
use inboxed_core::outbox::store::{ClaimToken, FailParams, Failed, OutboxStore};
use inboxed_core::outbox::{
    DeadAction, DeadParams, Outbox, OutboxBrowse, OutboxFilter, OutboxStatus, OutgoingMessage,
};
use inboxed_core::store::BeginParams;

use super::outbox::{claim, label, write_all};
use crate::backend::{Backend, TestDb};

/// Rows a1 and b1 dead (each parking its key), c1 sent, a2 and b2 waiting behind their keys:
/// the figures count them; the list and the load show them; a dry run finds a's dead row and
/// changes nothing; a retry of key a and a discard of key b, each audited, free their keys'
/// next rows; sent rows and rows no filter matches are never touched.
pub async fn outbox_operator_lists_retries_and_discards_dead_rows<B: Backend>(_test: &str) {
    let db = B::create().await;
    let ids = write_all(&db, &[("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]).await;
    let t = ClaimToken::random();
    let rows = claim(&db, "relay-1", &t, 10).await;
    assert_eq!(
        rows.iter().map(label).collect::<Vec<_>>(),
        ["a1", "b1", "c1"]
    );
    for row in &rows[..2] {
        let refuse = FailParams {
            id: row.id,
            token: &t,
            error: "NOT_ROUTED: no queue bound",
            backoff: Duration::ZERO,
            max_attempts: 5,
            permanent: true,
            now: None,
        };
        assert_eq!(db.store.fail_outbox(&refuse).await.unwrap(), Failed::Dead);
    }
    db.store.mark_sent(&[rows[2].id], &t, None).await.unwrap();

    let seen = db.store.observe().await.unwrap();
    assert_eq!(seen.outbox.len(), 1, "{:?}", seen.outbox);
    let orders = &seen.outbox[0];
    assert_eq!(orders.destination, "orders");
    assert_eq!(
        (
            orders.pending,
            orders.sending,
            orders.dead,
            orders.sent_last_minute
        ),
        (2, 0, 2, 1)
    );
    assert!(orders.oldest_unsent.is_some());

    let dead = db
        .store
        .list_outbox(&OutboxFilter::all().status(OutboxStatus::Dead), 10)
        .await
        .unwrap();
    assert_eq!(
        dead.iter()
            .map(|e| e.message_id.as_str())
            .collect::<Vec<_>>(),
        [ids[0].as_str(), ids[2].as_str()]
    );
    assert_eq!(dead[0].payload_bytes, 4);
    assert!(dead[0].payload.is_empty(), "a list carries no payloads");
    assert_eq!(
        dead[0].last_error.as_deref(),
        Some("NOT_ROUTED: no queue bound")
    );
    assert_eq!(dead[0].headers["n"], "a1");
    let full = db
        .store
        .load_outbox(None, Some(&ids[0]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(full.payload, b"\0\xffa1");
    assert_eq!(full.status, OutboxStatus::Dead);
    assert_eq!(
        db.store.load_outbox(Some(full.id), None).await.unwrap(),
        Some(full.clone())
    );
    assert_eq!(db.store.load_outbox(None, None).await.unwrap(), None);

    let key_a = OutboxFilter::all().ordering_key("a");
    assert_eq!(act(&db, &key_a, DeadAction::Retry, false).await, [full.id]);
    assert_eq!(dead_rows(&db).await, 2, "a dry run changes nothing");
    assert_eq!(audits(&db).await, 0, "and records nothing");

    assert_eq!(act(&db, &key_a, DeadAction::Retry, true).await, [full.id]);
    let key_b = OutboxFilter::all().ordering_key("b");
    assert_eq!(
        act(&db, &key_b, DeadAction::Discard, true).await,
        [rows[1].id]
    );
    assert_eq!(
        act(
            &db,
            &OutboxFilter::ids([rows[2].id]),
            DeadAction::Retry,
            true
        )
        .await,
        Vec::<i64>::new(),
        "a sent row is never retried"
    );
    assert_eq!(
        act(&db, &OutboxFilter::all(), DeadAction::Discard, true).await,
        Vec::<i64>::new(),
        "no dead row is left"
    );
    assert_eq!(dead_rows(&db).await, 0);
    assert_eq!(
        audits(&db).await,
        2,
        "one record per change that touched rows"
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_redrive_audit WHERE actor = 'oncall' \
             AND consumer_name = '' AND row_count = 1 \
             AND action IN ('outbox retry', 'outbox discard')"
        )
        .await,
        2
    );
    let retried = db
        .store
        .load_outbox(Some(full.id), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (retried.status, retried.attempts, retried.last_error),
        (OutboxStatus::Pending, 0, None)
    );
    assert_eq!(
        db.store.load_outbox(Some(rows[1].id), None).await.unwrap(),
        None,
        "discarded"
    );
    let t2 = ClaimToken::random();
    assert_eq!(
        claim(&db, "relay-2", &t2, 10)
            .await
            .iter()
            .map(label)
            .collect::<Vec<_>>(),
        ["a1", "b2"],
        "a's retried row goes first (a2 still behind it); b's next row is free"
    );
    db.finish().await;
}

/// The console's search: newest first; by status, destination, ordering key, payload text and
/// JSON path (a payload that is not JSON never matching); a message id found outside the
/// window; the window reaching no further than the newest ids; and the audit record naming
/// the filter it acted under.
pub async fn outbox_rows_are_searched_newest_first_within_a_window<B: Backend>(_test: &str) {
    let db = B::create().await;
    let outbox = Outbox::new(db.store.clone());
    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    let payloads: [(&str, Option<&str>, &[u8]); 5] = [
        ("orders", Some("k1"), br#"{"order":{"id":41},"paid":true}"#),
        ("orders", Some("k1"), br#"{"order":{"id":42},"paid":false}"#),
        ("billing", None, br#"{"order":{"id":"42"},"note":"refund"}"#),
        ("billing", Some("k2"), b"\0\xffnot json, has refund"),
        ("orders", None, br#"{"order":{"id":43}}"#),
    ];
    let mut ids = Vec::new();
    for (destination, key, payload) in payloads {
        let mut m = OutgoingMessage::new(destination, payload.to_vec());
        if let Some(key) = key {
            m = m.with_key(key);
        }
        ids.push(outbox.write(&mut tx, &m).await.unwrap().as_str().to_owned());
    }
    tx.commit().await.unwrap();
    assert_eq!(
        positions(&db, &ids, search(|_| {})).await,
        [4, 3, 2, 1, 0],
        "newest first"
    );
    assert_eq!(positions(&db, &ids, search(|b| b.limit = 2)).await, [4, 3]);
    assert_eq!(
        positions(&db, &ids, search(|b| b.destination = Some("billing"))).await,
        [3, 2]
    );
    assert_eq!(
        positions(&db, &ids, search(|b| b.ordering_key = Some("k1"))).await,
        [1, 0]
    );
    assert_eq!(
        positions(&db, &ids, search(|b| b.payload_contains = Some(b"refund"))).await,
        [3, 2],
        "payload text, in JSON and in bytes that are not UTF-8"
    );
    assert_eq!(
        positions(
            &db,
            &ids,
            search(|b| b.payload_json = Some(("order.id", "42")))
        )
        .await,
        [2, 1],
        "a number and a string compare as text; the payload that is not JSON never matches"
    );
    assert_eq!(
        positions(
            &db,
            &ids,
            search(|b| b.payload_json = Some(("paid", "false")))
        )
        .await,
        [1]
    );
    assert_eq!(
        positions(&db, &ids, search(|b| b.status = Some(OutboxStatus::Sent))).await,
        Vec::<usize>::new()
    );
    assert_eq!(
        positions(&db, &ids, search(|b| b.window = 2)).await,
        [4, 3],
        "the window"
    );
    assert_eq!(
        positions(
            &db,
            &ids,
            search(|b| {
                b.window = 1;
                b.message_id = Some(&ids[0]);
            })
        )
        .await,
        [0],
        "a message id is found outside the window"
    );
    assert_eq!(
        positions(
            &db,
            &ids,
            search(
                |b| b.created_from = Some(std::time::SystemTime::now() + Duration::from_secs(3600))
            )
        )
        .await,
        Vec::<usize>::new()
    );

    // Kill row 3 (key k2) and retry it under a filter: the audit record names the filter.
    let t = ClaimToken::random();
    let claimed = claim(&db, "relay-1", &t, 10).await;
    let row3 = claimed
        .iter()
        .find(|r| r.message_id.as_str() == ids[3])
        .unwrap();
    let refuse = FailParams {
        id: row3.id,
        token: &t,
        error: "too large",
        backoff: Duration::ZERO,
        max_attempts: 5,
        permanent: true,
        now: None,
    };
    assert_eq!(db.store.fail_outbox(&refuse).await.unwrap(), Failed::Dead);
    assert_eq!(
        positions(&db, &ids, search(|b| b.status = Some(OutboxStatus::Dead))).await,
        [3]
    );
    let mut filter = OutboxFilter::all().destination("billing");
    filter.ids = vec![row3.id];
    assert_eq!(act(&db, &filter, DeadAction::Retry, true).await, [row3.id]);
    let trail = ObserveStore::audit_trail(&db.store, None, 1).await.unwrap();
    assert_eq!(
        (trail[0].action.as_str(), trail[0].selector.clone()),
        (
            "outbox retry",
            format!("destination=\"billing\" ids=[{}]", row3.id)
        ),
        "the audit record names the filter"
    );
    db.finish().await;
}

/// A search with what `set` changes in the default one.
fn search<'a>(set: impl FnOnce(&mut OutboxBrowse<'a>)) -> OutboxBrowse<'a> {
    let mut b = OutboxBrowse::default();
    set(&mut b);
    b
}

/// The rows `b` finds, as their places in `ids` (the message ids in write order).
async fn positions<B: Backend>(db: &TestDb<B>, ids: &[String], b: OutboxBrowse<'_>) -> Vec<usize> {
    db.store
        .browse_outbox(&b)
        .await
        .unwrap()
        .iter()
        .map(|e| {
            assert!(e.payload.is_empty(), "a list carries no payloads");
            ids.iter().position(|id| *id == e.message_id).unwrap()
        })
        .collect()
}

async fn act<B: Backend>(
    db: &TestDb<B>,
    filter: &OutboxFilter,
    action: DeadAction,
    apply: bool,
) -> Vec<i64> {
    let params = DeadParams {
        filter,
        action,
        actor: "oncall",
        reason: "queue bound now",
        apply,
    };
    db.store.act_on_dead(&params).await.unwrap()
}

async fn dead_rows<B: Backend>(db: &TestDb<B>) -> i64 {
    db.scalar("SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'dead'")
        .await
}

async fn audits<B: Backend>(db: &TestDb<B>) -> i64 {
    db.scalar("SELECT count(*) FROM inboxed_redrive_audit WHERE action <> 'replay'")
        .await
}
