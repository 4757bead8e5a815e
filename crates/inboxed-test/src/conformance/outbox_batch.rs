//! The outbox's batch write: many messages in one call land in the order given, with their
//! fields and causes, exactly when the caller's transaction commits; one refused message writes
//! none of them.

use std::sync::atomic::Ordering;
use std::time::Duration;

use inboxed_core::driver::Transaction as _;
use inboxed_core::inbox::{Worker, WorkerConfig};
use inboxed_core::outbox::store::{ClaimToken, OutboxStore};
use inboxed_core::outbox::{Outbox, OutgoingError, OutgoingMessage, WriteError};
use inboxed_core::store::BeginParams;
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Ladder, Store};

use super::ledger_state;
use super::outbox::{claim, label, outbox_rows};
use crate::backend::{Backend, Conn};
use crate::handler::{Ledger, credit};

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
        Err(WriteError::Refused(OutgoingError::EmptyDestination))
    ));
    tx.commit().await.unwrap();
    assert_eq!(outbox_rows(&db).await, 50, "a refused batch writes nothing");
    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    assert!(outbox.write_many(&mut tx, &[]).await.unwrap().is_empty());
    tx.commit().await.unwrap();
    db.finish().await;
}

/// Store-then-process workers whose batch handler credits the ledger and announces each
/// message with `write_many`: 60 messages (a tenth received twice), a fifth of the handler's
/// calls failing after their writes, two workers in batches of 8. Every message is credited
/// once and announced once, caused by it; the failed calls' rows rolled back with their batch.
pub async fn worker_batches_announce_each_message_once<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (messages, expected) = super::inbox::stream("w", 60, 11, 0.0, None);
    super::inbox::enqueue_all(&db, messages, 4).await;
    let handler = Batches::<B> {
        outbox: Outbox::new(db.store.clone()).for_consumer(super::ledger()),
        ledger: Ledger::default(),
    };
    let config = WorkerConfig::default()
        .batch_size(8)
        .ladder(Ladder::constant(Duration::ZERO));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            Worker::new(
                db.store.clone(),
                super::ledger(),
                handler.clone(),
                config.clone(),
            )
        })
        .collect();
    super::inbox::drain(&db, &workers).await;
    assert_eq!(ledger_state(&db).await, (60, expected));
    assert_eq!(outbox_rows(&db).await, 60, "one announcement a message");
    assert_eq!(
        db.scalar(
            "SELECT count(DISTINCT caused_by_message_id) FROM inboxed_outbox_messages \
             WHERE caused_by_consumer = 'ledger'"
        )
        .await,
        60
    );
    assert!(
        handler.ledger.calls() > 60,
        "some batches failed and ran again: {} calls",
        handler.ledger.calls()
    );
    db.finish().await;
}

/// The ledger's handler, then the batch's announcements in one `write_many`; every fifth
/// batch fails transiently after its writes.
struct Batches<B: Backend> {
    outbox: Outbox<B::Store>,
    ledger: Ledger<B>,
}

impl<B: Backend> Clone for Batches<B> {
    fn clone(&self) -> Self {
        Self {
            outbox: self.outbox.clone(),
            ledger: self.ledger.clone(),
        }
    }
}

impl<B: Backend> Handler<<B::Store as Store>::Db> for Batches<B> {
    const BATCHES: bool = true;

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut Conn<B>,
    ) -> Result<(), HandlerError> {
        for msg in msgs {
            self.ledger.handle(msg, conn).await?;
        }
        let events: Vec<OutgoingMessage> = msgs
            .iter()
            .map(|m| OutgoingMessage::new("ledger.credited", m.payload().to_vec()).caused_by(m))
            .collect();
        self.outbox.write_many(conn, &events).await?;
        if self.ledger.batches.fetch_add(1, Ordering::SeqCst) % 5 == 4 {
            return Err(HandlerError::transient(
                "every fifth batch fails after its writes",
            ));
        }
        Ok(())
    }

    async fn handle(&self, msg: &Envelope, conn: &mut Conn<B>) -> Result<(), HandlerError> {
        self.handle_batch(&[msg], conn).await
    }
}
