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
    conn.execute("BEGIN")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ids = outbox
        .write_many(&mut conn, &messages)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    conn.execute("COMMIT")
        .await
        .unwrap_or_else(|e| panic!("{e}"));

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
        assert_eq!(row.get::<String, _>(5), m.headers_json());
        assert_eq!(row.get::<Vec<u8>, _>(6), m.payload(), "{id}");
        let cause: Option<Vec<u8>> = row.get(8);
        assert_eq!(cause.as_deref(), m.cause().map(str::as_bytes));
        let consumer: Option<Vec<u8>> = row.get(7);
        assert_eq!(consumer.is_some(), m.cause().is_some());
    }

    conn.execute("BEGIN")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    outbox
        .write_many(&mut conn, &messages)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    conn.execute("ROLLBACK")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_outbox_messages")
            .await,
        4
    );
    drop(conn);
    db.finish().await;
}
