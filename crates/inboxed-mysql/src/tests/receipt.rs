//! Receipts of one aggregate take turns: ordered mode reads arrival order from the row id, and
//! InnoDB draws an id at the insert, not at the commit. Two receipts of one aggregate that
//! overlapped could commit the later id first, and an ordered worker, whose check of earlier
//! rows cannot see an uncommitted one, would run the later message first.

use super::*;

use inboxed_core::engine::Engine as _;
use inboxed_core::inbox::store::{ClaimBatchParams, ClaimToken, EnqueueParams, InboxStore};
use inboxed_core::{ConsumerName, Envelope, MessageId};

fn event(id: &str) -> Envelope {
    let id = MessageId::new(id).unwrap_or_else(|e| panic!("{e}"));
    Envelope::new(id, b"{}".to_vec()).with_aggregate("order-7")
}

/// The ids an ordered claim of `consumer` gets now, in the order it gets them.
async fn ordered_claim(store: &MySqlStore, consumer: &ConsumerName) -> Vec<String> {
    let params = ClaimBatchParams {
        consumer,
        worker: "w",
        token: &ClaimToken::random(),
        limit: 10,
        lease: Duration::from_secs(60),
        now: None,
        ordered: true,
        park: true,
    };
    let rows = store
        .claim_batch(&params)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    rows.iter()
        .map(|r| r.envelope.id().as_str().to_owned())
        .collect()
}

/// The first receipt of aggregate `order-7` runs the store's own enqueue.sql in a transaction
/// the test holds open; a second receipt of the aggregate, begun meanwhile, waits for it
/// instead of committing a later id first, and an ordered claim meanwhile finds nothing to run.
/// Once the first commits, the claim gets the first message alone (the second waits behind it).
#[tokio::test]
async fn a_receipt_waits_for_an_uncommitted_receipt_of_its_aggregate() {
    let db = TestDb::new().await;
    inboxed_core::Store::migrate(&db.store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let consumer = ConsumerName::new("orders").unwrap_or_else(|e| panic!("{e}"));
    let first = event("e-1");
    let mut held = db.conn().await;
    held.execute("BEGIN")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stored = db
        .store
        .query(&db.store.queries.enqueue)
        .text(consumer.as_str())
        .text(first.id().as_str())
        .opt_text(first.aggregate_id())
        .opt_text(None)
        .opt_text(None)
        .bytes(first.payload())
        .bytes(first.hash().as_bytes())
        .opt_text(None)
        .fetch_all(&mut held)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stored.len(), 1, "the first receipt stored its row");

    let store = db.store.clone();
    let second_consumer = consumer.clone();
    let second = tokio::spawn(async move {
        let env = event("e-2");
        let params = EnqueueParams {
            consumer: &second_consumer,
            envelope: &env,
        };
        store.enqueue(&params).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let early = ordered_claim(&db.store, &consumer).await;
    assert!(
        early.is_empty(),
        "an ordered claim ran {early:?} while an earlier receipt of its aggregate was in flight"
    );
    assert!(
        !second.is_finished(),
        "the second receipt did not wait for the first"
    );
    held.execute("COMMIT")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    second
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ordered_claim(&db.store, &consumer).await, ["e-1"]);
    drop(held);
    db.finish().await;
}

/// `store_many` through the store's batch receipt.
async fn enqueue_many(
    store: &MySqlStore,
    consumer: &ConsumerName,
    envelopes: &[Envelope],
) -> Result<Vec<inboxed_core::inbox::store::Enqueued>, inboxed_core::StoreError> {
    let params = inboxed_core::inbox::store::EnqueueManyParams {
        consumer,
        envelopes,
    };
    store.enqueue_many(&params).await
}

/// A batch receipt keeps every payload byte, in parts: small messages share one insert, one
/// larger than a statement may carry (6 MiB, past the 4 MiB budget) is stored on its own, and
/// ids follow arrival order across them. A second batch holding a stored key is stored one
/// message at a time and tells duplicates and conflicts apart. An aggregate id longer than its
/// column fails the receipt whole (JSON_TABLE would have cut it with a warning): nothing of that
/// batch is stored.
#[tokio::test]
async fn a_batch_receipt_keeps_every_byte_in_parts_and_refuses_a_too_long_aggregate() {
    use inboxed_core::inbox::store::Enqueued;
    let db = TestDb::new().await;
    inboxed_core::Store::migrate(&db.store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let consumer = ConsumerName::new("orders").unwrap_or_else(|e| panic!("{e}"));
    let every_byte: Vec<u8> = (0..=255u8).collect();
    let large: Vec<u8> = (0..6 << 20).map(|i| (i % 251) as u8).collect();
    let message = |id: &str, payload: &[u8]| {
        Envelope::new(
            MessageId::new(id).unwrap_or_else(|e| panic!("{e}")),
            payload.to_vec(),
        )
    };
    let batch = vec![
        message("b-1", &every_byte).with_aggregate("order-7"),
        message("b-2", &large).with_aggregate("order-7"),
        message("b-3", b"").with_type("t'ype"),
        message("b-4", &every_byte[1..]).with_aggregate("order-8"),
    ];
    let outcomes = enqueue_many(&db.store, &consumer, &batch)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<i64> = outcomes
        .iter()
        .map(|o| match o {
            Enqueued::Stored { id } => *id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    for (env, id) in batch.iter().zip(&ids) {
        let row = sqlx::query(
            "SELECT payload, CONVERT(message_id USING utf8mb4), aggregate_id, message_type \
             FROM inboxed_inbox_messages WHERE id = ?",
        )
        .bind(id)
        .fetch_one(db.store.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(row.get::<Vec<u8>, _>(0), env.payload(), "{}", env.id());
        assert_eq!(row.get::<String, _>(1), env.id().as_str());
        let aggregate: Option<Vec<u8>> = row.get(2);
        assert_eq!(aggregate.as_deref(), env.aggregate_id().map(str::as_bytes));
        assert_eq!(
            row.get::<Option<String>, _>(3).as_deref(),
            env.message_type()
        );
    }

    let again = vec![
        message("b-5", b"5"),
        message("b-1", &every_byte),
        message("b-3", b"other"),
        message("b-5", b"5"),
    ];
    let outcomes = enqueue_many(&db.store, &consumer, &again)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(outcomes[0], Enqueued::Stored { .. }),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[1], Enqueued::Duplicate);
    assert!(
        matches!(outcomes[2], Enqueued::Conflict { .. }),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[3], Enqueued::Duplicate);

    let too_long = vec![
        message("b-6", b"6"),
        message("b-7", b"7").with_aggregate("a".repeat(513)),
    ];
    let refused = enqueue_many(&db.store, &consumer, &too_long).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_inbox_messages")
            .await,
        5
    );
    drop(batch);
    db.finish().await;
}
