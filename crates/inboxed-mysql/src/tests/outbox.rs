//! The outbox's batch write on MySQL (`outbox_write_many.sql`): messages in parts of one
//! statement each, every field and payload byte kept, ids in the order written.

use super::*;

use inboxed_core::outbox::{Outbox, OutgoingMessage};
use inboxed_core::{ConsumerName, Envelope, MessageId};

/// A batch handler's messages, one of them larger than a statement may carry (6 MiB, past the
/// 4 MiB budget) and written on its own: each row keeps its fields and payload bytes, the
/// cause, and an id in the order written; a rolled-back write leaves nothing.
#[tokio::test]
async fn a_batch_write_keeps_every_field_and_byte_in_the_order_written() {
    let db = TestDb::new().await;
    inboxed_core::Store::migrate(&db.store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let outbox = Outbox::new(db.store.clone())
        .for_consumer(ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}")));
    let inbound = Envelope::new(
        MessageId::new("in-1").unwrap_or_else(|e| panic!("{e}")),
        b"{}".to_vec(),
    );
    let every_byte: Vec<u8> = (0..=255u8).collect();
    let large: Vec<u8> = (0..6 << 20).map(|i| (i % 251) as u8).collect();
    let messages = vec![
        OutgoingMessage::new("orders.v1", every_byte.clone())
            .with_key("order-7")
            .with_type("t'ype")
            .with_correlation_id("c\"orr")
            .with_header("x-é", "\"quoted\" \\ 😀")
            .caused_by(&inbound),
        OutgoingMessage::new("orders.v1", large).with_key("order-7"),
        OutgoingMessage::new("audit", Vec::new()),
        OutgoingMessage::new("orders.v1", every_byte[1..].to_vec()).with_key("order-7"),
    ];
    let mut conn = db.conn().await;
    let mut tx = sqlx::Connection::begin(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ids = outbox
        .write_many(&mut tx, &messages)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));

    let rows = sqlx::query(
        "SELECT CONVERT(message_id USING utf8mb4), destination, ordering_key, message_type, \
         correlation_id, headers, payload, caused_by_consumer, caused_by_message_id \
         FROM inboxed_outbox_messages ORDER BY id",
    )
    .fetch_all(db.store.pool())
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows.len(), messages.len());
    for ((row, m), id) in rows.iter().zip(&messages).zip(&ids) {
        assert_eq!(row.get::<String, _>(0), id.as_str(), "written in order");
        assert_eq!(row.get::<String, _>(1), m.destination());
        let key: Option<Vec<u8>> = row.get(2);
        assert_eq!(key.as_deref(), m.ordering_key().map(str::as_bytes));
        assert_eq!(row.get::<Option<String>, _>(3).as_deref(), m.message_type());
        assert_eq!(
            row.get::<Option<String>, _>(4).as_deref(),
            m.correlation_id()
        );
        let headers: serde_json::Value = serde_json::from_str(&row.get::<String, _>(5)).unwrap();
        assert_eq!(headers, serde_json::json!(m.headers()));
        assert_eq!(row.get::<Vec<u8>, _>(6), m.payload(), "{id}");
        let cause: Option<Vec<u8>> = row.get(8);
        assert_eq!(cause.as_deref(), m.cause().map(str::as_bytes));
        let consumer: Option<Vec<u8>> = row.get(7);
        assert_eq!(consumer.is_some(), m.cause().is_some());
    }

    let mut tx = sqlx::Connection::begin(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    outbox
        .write_many(&mut tx, &messages)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tx.rollback().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_outbox_messages")
            .await,
        4
    );
    drop(conn);
    db.finish().await;
}

/// A lock-held batch whose transaction failed (rolled back, its connection back in the pool)
/// leaves its record, and the batch's named lock goes with the pool's reset: the reaper judges
/// the record (every row held beside others, so none is charged, and each may go with at most
/// half the batch from now on). A named lock left held by the pooled connection would keep the
/// record from every reaper for good, and a row that failed its batch would never be halved.
#[tokio::test]
async fn a_lock_held_batch_whose_transaction_failed_is_judged() {
    use inboxed_core::outbox::store::{ClaimToken, LockOutboxParams, OutboxStore};
    use inboxed_core::store::{BeginParams, Store};
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    let outbox = Outbox::new(db.store.clone());
    let mut conn = db.conn().await;
    let mut tx = sqlx::Connection::begin(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let messages: Vec<OutgoingMessage> = (0..4)
        .map(|n| OutgoingMessage::new("orders", vec![n]))
        .collect();
    outbox
        .write_many(&mut tx, &messages)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
    drop(conn);

    let mut tx = db
        .store
        .begin(&BeginParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let params = LockOutboxParams {
        limit: 10,
        lock_key: 42,
        now: None,
    };
    let rows = db
        .store
        .lock_outbox(&mut tx, &params)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows.len(), 4);
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    db.store
        .hold_outbox(&ClaimToken::random(), 42, "relay-1", &ids)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        db.store
            .reap_unmarked_outbox(5)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        0,
        "a live batch is not judged"
    );
    tx.rollback().await.unwrap_or_else(|e| panic!("{e}"));
    // The pool resets the connection as it takes it back, in the background.
    let mut judged = 0;
    for _ in 0..40 {
        judged = db
            .store
            .reap_unmarked_outbox(5)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if judged > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(judged, 4, "the failed batch's record was judged");
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM inboxed_outbox_messages \
             WHERE status = 'pending' AND attempts = 0 AND group_limit = 2"
        )
        .await,
        4
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_outbox_unmarked")
            .await,
        0
    );
    db.finish().await;
}

/// A lock-held batch that cannot take its named lock (another connection holds the name: the
/// batch before it, not yet reset by the pool) claims nothing, rather than publish unmarked
/// while a reaper takes its record for a dead batch's; with the name free it claims its rows.
#[tokio::test]
async fn a_lock_held_batch_without_its_named_lock_claims_nothing() {
    use inboxed_core::outbox::store::{LockOutboxParams, OutboxStore};
    use inboxed_core::store::{BeginParams, Store};
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    let mut conn = db.conn().await;
    let mut tx = sqlx::Connection::begin(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Outbox::new(db.store.clone())
        .write_many(&mut tx, &[OutgoingMessage::new("orders", vec![1])])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
    let mut other = db.conn().await.detach();
    let take = "SELECT GET_LOCK(CONCAT('inboxed/', SHA1(CONCAT('`', DATABASE(), \
                '`.inboxed_outbox_unmarked/', 7))), 0)";
    let got: i64 = sqlx::query_scalar(take)
        .fetch_one(&mut other)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, 1, "the test holds the batch's name");
    let params = LockOutboxParams {
        limit: 10,
        lock_key: 7,
        now: None,
    };
    let lock = async || {
        let mut tx = db
            .store
            .begin(&BeginParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let rows = db.store.lock_outbox(&mut tx, &params).await;
        tx.rollback().await.unwrap_or_else(|e| panic!("{e}"));
        rows.unwrap_or_else(|e| panic!("{e}")).len()
    };
    assert_eq!(lock().await, 0, "claimed without its named lock");
    other
        .execute("DO RELEASE_ALL_LOCKS()")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lock().await, 1);
    drop((conn, other));
    db.finish().await;
}
