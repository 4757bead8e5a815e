//! The outbox's write: an outgoing message lands exactly when the business change beside it
//! commits, from plain application code and from a handler, once per inbound message.

use inboxed_core::outbox::{Outbox, OutgoingError, OutgoingMessage};
use inboxed_core::store::BeginParams;
use inboxed_core::{Envelope, Error, Handler, HandlerError, Outcome, Processor, Store};

use super::{ledger, ledger_state};
use crate::backend::{Backend, Conn};
use crate::handler::credit;

/// Application code with no inbox: the outgoing message and the ledger row commit together,
/// roll back together, and a message the outbox refuses writes nothing.
pub async fn outbox_writes_commit_and_roll_back_with_the_business_change<B: Backend>(_test: &str) {
    let db = B::create().await;
    let outbox = Outbox::new(db.store.clone());
    let event = OutgoingMessage::new("billing.charged", b"\x00\xffraw".to_vec())
        .with_key("a")
        .with_type("Charged")
        .with_header("schema", "v2");

    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    B::ledger_insert(&mut tx, "rolled-back", "a", 5)
        .await
        .unwrap();
    outbox.write(&mut tx, &event).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(ledger_state(&db).await, (0, 0));
    assert_eq!(
        outbox_rows(&db).await,
        0,
        "a rolled-back write sends nothing"
    );

    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    B::ledger_insert(&mut tx, "committed", "a", 5)
        .await
        .unwrap();
    let id = outbox.write(&mut tx, &event).await.unwrap();
    let second = outbox.write(&mut tx, &event).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ledger_state(&db).await, (1, 5));
    assert_eq!(outbox_rows(&db).await, 2);
    assert_ne!(id, second, "each write mints its own id");
    assert!(
        uuid::Uuid::parse_str(id.as_str()).is_ok_and(|u| u.get_version_num() == 7),
        "the id is a time-ordered UUID: {id}"
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_outbox_messages WHERE destination = 'billing.charged' \
             AND ordering_key = 'a' AND message_type = 'Charged' AND length(payload) = 5 \
             AND status = 'pending' AND caused_by_message_id IS NULL"
        )
        .await,
        2
    );

    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    let refused = outbox
        .write(&mut tx, &OutgoingMessage::new("", b"x".to_vec()))
        .await;
    assert!(matches!(
        refused,
        Err(Error::InvalidOutgoing(OutgoingError::EmptyDestination))
    ));
    tx.commit().await.unwrap();
    assert_eq!(
        outbox_rows(&db).await,
        2,
        "a refused message writes nothing"
    );
    db.finish().await;
}

/// A handler that credits the ledger and announces it through the outbox: a redelivery writes
/// no second message, a handler failing after its write sends nothing, and the message names
/// its cause (the consumer and the inbound id) and carries its correlation id.
pub async fn handler_outbox_messages_land_once_per_inbound_message<B: Backend>(_test: &str) {
    let db = B::create().await;
    let outbox = Outbox::new(db.store.clone()).for_consumer(ledger());
    let p = Processor::new(db.store.clone(), ledger(), Announcing::<B> { outbox });

    let msg = credit("m-1", 10).with_correlation_id("order-7");
    assert_eq!(p.process(&msg, Some(1)).await.unwrap(), Outcome::Processed);
    assert_eq!(p.process(&msg, Some(2)).await.unwrap(), Outcome::Duplicate);
    assert_eq!(ledger_state(&db).await, (1, 10));
    assert_eq!(
        outbox_rows(&db).await,
        1,
        "a redelivery writes no second message"
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_outbox_messages WHERE caused_by_consumer = 'ledger' \
             AND caused_by_message_id = 'm-1' AND correlation_id = 'order-7'"
        )
        .await,
        1
    );

    // The handler writes its message, then fails for good: both roll back.
    let poison = credit("m-2", -1);
    let outcome = p.process(&poison, Some(1)).await.unwrap();
    assert!(
        matches!(outcome, Outcome::DeadLettered { .. }),
        "{outcome:?}"
    );
    assert_eq!(ledger_state(&db).await, (1, 10));
    assert_eq!(outbox_rows(&db).await, 1, "a failed handler sends nothing");
    db.finish().await;
}

/// Credits the ledger and writes a `ledger.credited` message caused by the inbound one; a
/// negative amount fails permanently after both writes.
struct Announcing<B: Backend> {
    outbox: Outbox<B::Store>,
}

impl<B: Backend> Handler<<B::Store as Store>::Db> for Announcing<B>
where
    B::Store: inboxed_core::outbox::store::OutboxStore,
{
    async fn handle(&self, msg: &Envelope, conn: &mut Conn<B>) -> Result<(), HandlerError> {
        let amount = msg.json::<crate::handler::Script>().map_or(0, |s| s.amount);
        B::ledger_insert(conn, msg.id().as_str(), "a", amount).await?;
        let event = OutgoingMessage::new("ledger.credited", msg.payload().to_vec())
            .with_key("a")
            .caused_by(msg);
        self.outbox
            .write(conn, &event)
            .await
            .map_err(HandlerError::transient)?;
        if amount < 0 {
            return Err(HandlerError::permanent("negative credit"));
        }
        Ok(())
    }
}

async fn outbox_rows<B: Backend>(db: &crate::backend::TestDb<B>) -> i64 {
    db.scalar("SELECT count(*) FROM inboxed_outbox_messages")
        .await
}
