//! The outbox's batch write: many messages in one call land in the order given, with their
//! fields and causes, exactly when the caller's transaction commits; one refused message writes
//! none of them.

use inboxed_core::outbox::store::{ClaimToken, OutboxStore};
use inboxed_core::outbox::{Outbox, OutgoingError, OutgoingMessage};
use inboxed_core::store::BeginParams;
use inboxed_core::{ConsumerName, Error, Store};

use super::ledger_state;
use super::outbox::{claim, label, outbox_rows};
use crate::backend::Backend;
use crate::handler::credit;

/// 50 messages of two keys in one call (quiet, as a writer of small transactions would set it):
/// rolled back, none; committed, all, their ids as returned, in the order given, each key's
/// rows claimed in it; caused by the inbound message of the consumer that wrote them; a batch
/// holding one message the outbox refuses writes none of it.
pub async fn outbox_write_many_keeps_order_and_commits_with_the_transaction<B: Backend>(
    _test: &str,
) {
    let db = B::create().await;
    let outbox = Outbox::new(db.store.clone())
        .for_consumer(ConsumerName::new("billing").unwrap())
        .quiet();
    let inbound = credit("in-1", 5).with_correlation_id("corr-7");
    let messages: Vec<OutgoingMessage> = (0..50)
        .map(|i| {
            let key = if i % 2 == 0 { "even" } else { "odd" };
            OutgoingMessage::new("orders", format!("\0{i}").into_bytes())
                .with_key(key)
                .with_header("n", format!("{key}{i}"))
                .caused_by(&inbound)
        })
        .collect();

    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    B::ledger_insert(&mut tx, "in-1", "a", 5).await.unwrap();
    outbox.write_many(&mut tx, &messages).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(
        outbox_rows(&db).await,
        0,
        "a rolled-back batch sends nothing"
    );

    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    B::ledger_insert(&mut tx, "in-1", "a", 5).await.unwrap();
    let ids = outbox.write_many(&mut tx, &messages).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ledger_state(&db).await, (1, 5));
    assert_eq!(outbox_rows(&db).await, 50);
    assert_eq!(ids.len(), 50);
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_outbox_messages WHERE caused_by_consumer = 'billing' \
             AND caused_by_message_id = 'in-1' AND correlation_id = 'corr-7'"
        )
        .await,
        50
    );
    // Ids follow the order given: the first claim takes the first row of each key.
    let t = ClaimToken::random();
    let first = claim(&db, "relay-1", &t, 100).await;
    assert_eq!(
        first.iter().map(label).collect::<Vec<_>>(),
        ["even0", "odd1"]
    );
    assert_eq!(first[0].message_id, ids[0].as_str());
    assert_eq!(first[1].message_id, ids[1].as_str());
    assert_eq!(first[0].payload, b"\x000");
    db.store
        .mark_sent(&[first[0].id, first[1].id], &t, None)
        .await
        .unwrap();
    let t = ClaimToken::random();
    assert_eq!(
        claim(&db, "relay-1", &t, 100)
            .await
            .iter()
            .map(label)
            .collect::<Vec<_>>(),
        ["even2", "odd3"]
    );

    let mut batch = messages[..3].to_vec();
    batch.push(OutgoingMessage::new("", b"x".to_vec()));
    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    let refused = outbox.write_many(&mut tx, &batch).await;
    assert!(matches!(
        refused,
        Err(Error::InvalidOutgoing(OutgoingError::EmptyDestination))
    ));
    tx.commit().await.unwrap();
    assert_eq!(outbox_rows(&db).await, 50, "a refused batch writes nothing");
    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    assert!(outbox.write_many(&mut tx, &[]).await.unwrap().is_empty());
    tx.commit().await.unwrap();
    db.finish().await;
}
