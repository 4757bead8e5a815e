//! What an operator does with the outbox: its figures, its rows listed and loaded, and dead
//! rows retried or discarded under a filter, each change audited and a dry run changing
//! nothing.

use std::time::Duration;

use inboxed_core::observe::ObserveStore;
use inboxed_core::outbox::store::{ClaimToken, FailParams, Failed, OutboxStore};
use inboxed_core::outbox::{DeadAction, DeadParams, OutboxFilter, OutboxStatus};

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
