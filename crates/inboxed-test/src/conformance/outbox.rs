//! The outbox's write: an outgoing message lands exactly when the business change beside it
//! commits, from plain application code and from a handler, once per inbound message.

use std::time::{Duration, SystemTime};

use inboxed_core::driver::Transaction as _;
use inboxed_core::outbox::store::{
    ClaimOutboxParams, ClaimToken, FailParams, Failed, OutboxRow, OutboxStore,
};
use inboxed_core::outbox::{Outbox, OutgoingError, OutgoingMessage, WriteError};
use inboxed_core::store::BeginParams;
use inboxed_core::{Envelope, Handler, HandlerError, Outcome, Processor, Store};

use super::{ledger, ledger_state};
use crate::backend::{Backend, Conn, TestDb};
use crate::handler::credit;

/// Application code with no inbox: the outgoing message and the ledger row commit together,
/// roll back together, and a message the outbox refuses, or a write outside a transaction,
/// writes nothing.
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
        Err(WriteError::Refused(OutgoingError::EmptyDestination))
    ));
    tx.commit().await.unwrap();
    assert_eq!(
        outbox_rows(&db).await,
        2,
        "a refused message writes nothing"
    );

    // A connection outside a transaction: the row would commit on its own, whatever became
    // of the business change, so the write is refused and writes nothing, alone or many.
    let mut conn = B::acquire(&db.store).await;
    let outside = outbox.write(&mut conn, &event).await;
    assert!(
        matches!(outside, Err(WriteError::NotInTransaction)),
        "{outside:?}"
    );
    let outside = outbox.write_many(&mut conn, &[event.clone(), event]).await;
    assert!(
        matches!(outside, Err(WriteError::NotInTransaction)),
        "{outside:?}"
    );
    drop(conn);
    assert_eq!(
        outbox_rows(&db).await,
        2,
        "a write outside a transaction writes nothing"
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

impl<B: Backend> Handler<<B::Store as Store>::Db> for Announcing<B> {
    async fn handle(&self, msg: &Envelope, conn: &mut Conn<B>) -> Result<(), HandlerError> {
        let amount = msg.json::<crate::handler::Script>().map_or(0, |s| s.amount);
        B::ledger_insert(conn, msg.id().as_str(), "a", amount).await?;
        let event = OutgoingMessage::new("ledger.credited", msg.payload().to_vec())
            .with_key("a")
            .caused_by(msg);
        self.outbox.write(conn, &event).await?;
        if amount < 0 {
            return Err(HandlerError::permanent("negative credit"));
        }
        Ok(())
    }
}

pub(super) async fn outbox_rows<B: Backend>(db: &TestDb<B>) -> i64 {
    db.scalar("SELECT count(*) FROM inboxed_outbox_messages")
        .await
}

/// What a relay claims: unsent rows in insert order, one at a time per ordering key, never a
/// row another relay holds; marking sent is fenced by the claim's token, and a key's next row
/// comes only after its earlier one was sent.
pub async fn outbox_claims_follow_key_order_and_marks_are_fenced<B: Backend>(_test: &str) {
    let db = B::create().await;
    let written = write_all(
        &db,
        &[("a", 1), ("a", 2), ("b", 1), ("", 1), ("a", 3), ("b", 2)],
    )
    .await;
    let (t1, t2) = (ClaimToken::random(), ClaimToken::random());
    let first = claim(&db, "relay-1", &t1, 10).await;
    let labels = |rows: &[OutboxRow]| rows.iter().map(label).collect::<Vec<_>>();
    assert_eq!(
        labels(&first),
        ["a1", "b1", "-1"],
        "the first row of each key, and keyless"
    );
    assert_eq!(
        first[0].message_id, written[0],
        "published under the id minted at the write"
    );
    assert_eq!(
        first[0].payload,
        b"\x00\xffa1".to_vec(),
        "the bytes as written"
    );
    assert_eq!(first[0].headers.get("n").map(String::as_str), Some("a1"));
    assert_eq!(first[0].attempts, 1);
    assert!(
        claim(&db, "relay-2", &t2, 10).await.is_empty(),
        "a key's next row waits while its earlier one is being sent"
    );

    let ids: Vec<i64> = first.iter().map(|r| r.id).collect();
    assert!(
        db.store
            .mark_sent(&ids, &t2, None)
            .await
            .unwrap()
            .is_empty(),
        "another claim's token marks nothing"
    );
    assert_eq!(db.store.mark_sent(&ids, &t1, None).await.unwrap().len(), 3);
    let second = claim(&db, "relay-2", &t2, 10).await;
    assert_eq!(labels(&second), ["a2", "b2"]);
    let ids: Vec<i64> = second.iter().map(|r| r.id).collect();
    db.store.mark_sent(&ids, &t2, None).await.unwrap();
    assert_eq!(labels(&claim(&db, "relay-1", &t1, 10).await), ["a3"]);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sent'")
            .await,
        5
    );
    db.finish().await;
}

/// A refused row goes dead with the broker's reason and parks only its key; a transient
/// failure waits out its backoff; a relay that died has its rows back after the lease, to be
/// sent again under the same id; a row held beside others is not charged for its relay's
/// death but halved, and a row out of attempts that its relay held alone goes dead.
pub async fn outbox_failures_park_only_their_key<B: Backend>(_test: &str) {
    let db = B::create().await;
    write_all(&db, &[("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]).await;
    let t = ClaimToken::random();
    let now = SystemTime::now();
    let rows = claim(&db, "relay-1", &t, 10).await;
    assert_eq!(
        rows.iter().map(label).collect::<Vec<_>>(),
        ["a1", "b1", "c1"]
    );
    let fail = |row: &OutboxRow, permanent: bool| FailParams {
        id: row.id,
        token: &t,
        error: "NOT_ROUTED: no queue bound for destination",
        backoff: Duration::from_secs(60),
        max_attempts: 5,
        permanent,
        now: Some(now),
    };
    assert_eq!(
        db.store.fail_outbox(&fail(&rows[0], true)).await.unwrap(),
        Failed::Dead
    );
    assert_eq!(
        db.store.fail_outbox(&fail(&rows[1], false)).await.unwrap(),
        Failed::Retrying
    );
    assert_eq!(
        db.store.fail_outbox(&fail(&rows[1], false)).await.unwrap(),
        Failed::LostClaim,
        "a marked claim cannot be failed again"
    );
    // c1 is held by a relay that dies: nothing marks it.
    let t2 = ClaimToken::random();
    let params = |now| ClaimOutboxParams {
        relay: "relay-2",
        token: &t2,
        limit: 10,
        lease: Duration::from_secs(30),
        now: Some(now),
    };
    assert!(
        db.store
            .claim_outbox(&params(now))
            .await
            .unwrap()
            .is_empty(),
        "a is parked by its dead row, b waits out its backoff, c is held"
    );
    let later = now + Duration::from_secs(61);
    assert_eq!(
        db.store
            .release_stale_outbox(5, 100, Some(later))
            .await
            .unwrap(),
        1
    );
    let again = db.store.claim_outbox(&params(later)).await.unwrap();
    assert_eq!(again.iter().map(label).collect::<Vec<_>>(), ["b1", "c1"]);
    assert_eq!(
        again[1].message_id, rows[2].message_id,
        "a re-send keeps the id"
    );
    assert_eq!(again[1].attempts, 2);
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'dead' \
             AND last_error LIKE 'NOT_ROUTED%'"
        )
        .await,
        1
    );
    // Out of attempts at the reaper, held beside another row. b1 is not charged (either may
    // have been the cause) and may go with at most half its batch from now on; c1 is, because
    // its limit said "alone" since its first relay's death and this claim ignored it (only a
    // relay applies the limit), so the halving could not corner anything.
    let much_later = later + Duration::from_secs(31);
    assert_eq!(
        db.store
            .release_stale_outbox(2, 100, Some(much_later))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'pending' \
             AND attempts = 1 AND group_limit = 1 AND last_error LIKE 'lease expired%batch of 2%'"
        )
        .await,
        1,
        "b1 pending, its attempt given back, to go alone"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'dead'")
            .await,
        2,
        "a1 refused; c1 out of attempts, held against its limit"
    );
    // Alone, b1's relay dies: charged, and out of attempts.
    let t3 = ClaimToken::random();
    let alone = db
        .store
        .claim_outbox(&ClaimOutboxParams {
            relay: "relay-3",
            token: &t3,
            limit: 1,
            lease: Duration::from_secs(30),
            now: Some(much_later),
        })
        .await
        .unwrap();
    assert_eq!(alone.iter().map(label).collect::<Vec<_>>(), ["b1"]);
    assert_eq!(alone[0].group_limit, Some(1));
    let past = much_later + Duration::from_secs(31);
    assert_eq!(
        db.store
            .release_stale_outbox(2, 100, Some(past))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'dead'")
            .await,
        3,
        "and b1, out of attempts after its relay died publishing it alone"
    );
    db.finish().await;
}

/// The purge of sent rows: only rows sent before the cut-off go, oldest first and in bounded
/// batches; pending and dead rows stay whatever their age.
pub async fn outbox_purge_deletes_only_old_sent_rows<B: Backend>(_test: &str) {
    let db = B::create().await;
    write_all(&db, &[("", 1), ("", 2), ("", 3), ("", 4), ("", 5)]).await;
    let t = ClaimToken::random();
    let rows = claim(&db, "relay-1", &t, 4).await;
    let then = SystemTime::now() - Duration::from_secs(3_600);
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    // Three sent an hour ago, in order; the fourth refused for good.
    for (i, id) in ids[..3].iter().enumerate() {
        let at = then + Duration::from_secs(i as u64);
        db.store.mark_sent(&[*id], &t, Some(at)).await.unwrap();
    }
    let dead = FailParams {
        id: ids[3],
        token: &t,
        error: "too large",
        backoff: Duration::ZERO,
        max_attempts: 1,
        permanent: true,
        now: None,
    };
    assert_eq!(db.store.fail_outbox(&dead).await.unwrap(), Failed::Dead);
    let cut = then + Duration::from_secs(2);
    assert_eq!(db.store.purge_sent(cut, 1).await.unwrap(), 1, "bounded");
    assert_eq!(
        db.store.purge_sent(cut, 10).await.unwrap(),
        1,
        "the next oldest"
    );
    assert_eq!(
        db.store.purge_sent(cut, 10).await.unwrap(),
        0,
        "the third was sent after the cut"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_messages")
            .await,
        3,
        "the late sent row, the dead one and the pending one stay"
    );
    assert_eq!(
        db.store.purge_sent(SystemTime::now(), 10).await.unwrap(),
        1,
        "every sent row once the cut-off passes them"
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_outbox_messages WHERE status IN ('dead', 'pending')"
        )
        .await,
        2
    );
    db.finish().await;
}

/// Writes one message per `(key, n)` in one transaction (key "" for none): destination
/// `orders`, payload `\0\xff` + label, header `n` = label. Their ids, in order.
pub(super) async fn write_all<B: Backend>(db: &TestDb<B>, rows: &[(&str, u32)]) -> Vec<String> {
    let outbox = Outbox::new(db.store.clone());
    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    let mut ids = Vec::new();
    for (key, n) in rows {
        let name = format!("{}{n}", if key.is_empty() { "-" } else { key });
        let mut payload = b"\x00\xff".to_vec();
        payload.extend_from_slice(name.as_bytes());
        let mut m = OutgoingMessage::new("orders", payload).with_header("n", name);
        if !key.is_empty() {
            m = m.with_key(*key);
        }
        ids.push(outbox.write(&mut tx, &m).await.unwrap().as_str().to_owned());
    }
    tx.commit().await.unwrap();
    ids
}

pub(super) async fn claim<B: Backend>(
    db: &TestDb<B>,
    relay: &str,
    token: &ClaimToken,
    limit: u32,
) -> Vec<OutboxRow> {
    let params = ClaimOutboxParams {
        relay,
        token,
        limit,
        lease: Duration::from_secs(30),
        now: None,
    };
    db.store.claim_outbox(&params).await.unwrap()
}

/// `a1`, `b2`, `-1`: the row's `n` header.
pub(super) fn label(row: &OutboxRow) -> String {
    row.headers.get("n").cloned().unwrap_or_default()
}
