//! Bad input gets a typed error and writes nothing; configurable names stay apart.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use inboxed_core::{
    BoxError, ConsumerName, DeadLetterReason, Delivery, Envelope, EnvelopeError, MessageId,
    Namespace, Outcome, ProcessorConfig, Settled, Store, StoreError, settle,
};

use super::{ledger_state, processor};
use crate::backend::Backend;
use crate::handler::{Ledger, credit};

/// An in-process delivery whose id arrives as raw bytes, as from a header.
struct RawDelivery {
    id: Vec<u8>,
    payload: Vec<u8>,
    log: Arc<Mutex<Vec<&'static str>>>,
}

impl Delivery for RawDelivery {
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        Ok(Envelope::new(
            MessageId::from_bytes(&self.id)?,
            self.payload.clone(),
        ))
    }
    fn payload(&self) -> &[u8] {
        &self.payload
    }
    async fn ack(self) -> Result<(), BoxError> {
        self.log.lock().expect("log").push("ack");
        Ok(())
    }
    async fn requeue(self, _delay: Option<Duration>) -> Result<(), BoxError> {
        self.log.lock().expect("log").push("requeue");
        Ok(())
    }
    async fn reject(self) -> Result<(), BoxError> {
        self.log.lock().expect("log").push("reject");
        Ok(())
    }
}

/// Empty, oversized, NUL-containing and non-UTF-8 ids, bad consumer names and bad schema or
/// table names are refused with typed errors. Through the consumer path, a delivery with such
/// an id is dead-lettered (without a key) and acked: never processed, never dropped.
pub async fn invalid_input_is_rejected_and_nothing_is_written<B: Backend>(_test: &str) {
    assert_eq!(MessageId::new(""), Err(EnvelopeError::EmptyId));
    assert!(matches!(
        MessageId::new("x".repeat(513)),
        Err(EnvelopeError::IdTooLong { len: 513, max: 512 })
    ));
    assert_eq!(
        MessageId::new("a\0b"),
        Err(EnvelopeError::IdContainsNul { offset: 1 })
    );
    assert_eq!(
        MessageId::from_bytes(b"\xff\xfe"),
        Err(EnvelopeError::IdNotUtf8)
    );
    for bad in [
        "",
        "billing'; DROP TABLE ledger; --",
        "a b",
        &"c".repeat(129),
    ] {
        assert!(
            matches!(
                ConsumerName::new(bad),
                Err(EnvelopeError::InvalidConsumer { .. })
            ),
            "{bad:?}"
        );
    }
    for (schema, prefix) in [
        ("public\"; DROP TABLE ledger; --", "x_"),
        ("public", "x\"_"),
        ("public", "a b"),
    ] {
        assert!(matches!(
            Namespace::new(schema, prefix),
            Err(StoreError::InvalidIdentifier { .. })
        ));
    }

    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    let bad_ids: [&[u8]; 4] = [b"", &[b'x'; 600], b"nul\0id", b"\xc3\x28"];
    for id in bad_ids {
        let log = Arc::new(Mutex::new(Vec::new()));
        let delivery = RawDelivery {
            id: id.to_vec(),
            payload: br#"{"amount":5}"#.to_vec(),
            log: log.clone(),
        };
        let settled = settle(&p, delivery, None).await.expect("settled");
        let reason = DeadLetterReason::InvalidMessage;
        assert!(
            matches!(settled, Settled::Acked(Outcome::DeadLettered { reason: r }) if r == reason),
            "{settled:?}"
        );
        assert_eq!(
            *log.lock().unwrap(),
            vec!["ack"],
            "acked only after the dead letter was written"
        );
    }
    assert_eq!(handler.calls(), 0);
    assert_eq!(ledger_state(&db).await, (0, 0));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        0
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE message_id IS NULL AND reason = 'invalid_message'").await,
        4
    );
    db.finish().await;
}

/// A store in another schema (PostgreSQL) or with another table prefix keeps its own tables;
/// migrating twice is a no-op.
pub async fn custom_namespace_keeps_tables_apart<B: Backend>(_test: &str) {
    let db = B::create().await;
    let store = B::namespaced(&db).await;
    // Every migration the engine has, from the first, in order (PostgreSQL and SQLite have
    // 13; an engine started later begins from their result with fewer).
    let applied = store.migrate().await.unwrap();
    assert!(
        applied.first() == Some(&1) && applied.windows(2).all(|w| w[0] < w[1]),
        "{applied:?}"
    );
    assert_eq!(
        store.migrate().await.unwrap(),
        Vec::<i64>::new(),
        "second run is a no-op"
    );
    assert_eq!(db.store.migrate().await.unwrap(), Vec::<i64>::new());
    let p = inboxed_core::Processor::new(store, super::ledger(), Ledger::<B>::default());
    assert_eq!(
        p.process(&credit("m-ns", 2), Some(1)).await.unwrap(),
        Outcome::Processed
    );
    assert_eq!(
        p.process(&credit("m-ns", 2), Some(2)).await.unwrap(),
        Outcome::Duplicate
    );
    assert_eq!(db.scalar(B::NAMESPACED_PROCESSED_COUNT).await, 1);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        0
    );
    assert_eq!(ledger_state(&db).await, (1, 2));
    db.finish().await;
}
