//! The operator's view: backlog by status, expired leases and dead letters, as `inboxed serve`
//! and `inboxed stats` read them.

use std::time::{Duration, SystemTime};

use inboxed_core::EnvelopeError;
use inboxed_core::inbox::store::{ClaimBatchParams, ClaimToken, InboxStore};
use inboxed_core::observe::ObserveStore;

use super::inbox;
use crate::backend::{Backend, TestDb};
use crate::conformance::ledger;
use crate::handler::credit;

const KILL_O4: &str = "UPDATE inboxed_inbox_messages SET status = 'dead' \
                       WHERE message_id = 'o-4' RETURNING CAST(1 AS BIGINT)";
const KILL_O6: &str = "UPDATE inboxed_inbox_messages SET status = 'dead' \
                       WHERE message_id = 'o-6' RETURNING CAST(1 AS BIGINT)";

/// Three plain rows, one of them claimed with a lease that has run out; three rows of two
/// aggregates, one dead in each; a keyless delivery dead-lettered: the observation counts each
/// where it is, and nothing else.
pub async fn observation_counts_backlog_and_dead_letters<B: Backend>(_test: &str) {
    let db: TestDb<B> = B::create().await;
    let empty = db.store.observe().await.unwrap();
    assert!(
        empty.backlog.is_empty() && empty.dead_letters.is_empty(),
        "{empty:?}"
    );
    let received = SystemTime::now();
    let inbox = inbox(&db);
    for id in ["o-1", "o-2", "o-3"] {
        inbox.store(&credit(id, 1)).await.unwrap();
    }
    // Two aggregates with a dead row each (one with a later row parked behind it).
    for (id, aggregate) in [("o-4", "acct-1"), ("o-5", "acct-1"), ("o-6", "acct-2")] {
        inbox
            .store(&credit(id, 1).with_aggregate(aggregate))
            .await
            .unwrap();
    }
    for kill in [KILL_O4, KILL_O6] {
        assert_eq!(db.scalar(kill).await, 1);
    }
    let consumer = ledger();
    let token = ClaimToken::random();
    let params = ClaimBatchParams {
        consumer: &consumer,
        worker: "observed",
        token: &token,
        limit: 1,
        lease: Duration::ZERO,
        now: None,
        ordered: false,
        park: true,
    };
    assert_eq!(db.store.claim_batch(&params).await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(20)).await;
    inbox
        .dead_letter_invalid(b"{}", &EnvelopeError::MissingId)
        .await
        .unwrap();

    let seen = db.store.observe().await.unwrap();
    assert_eq!(seen.backlog.len(), 1, "{seen:?}");
    let b = &seen.backlog[0];
    assert_eq!(b.consumer, consumer.as_str());
    assert_eq!(
        (
            b.pending,
            b.processing,
            b.dead,
            b.expired_leases,
            b.parked_aggregates
        ),
        (3, 1, 2, 1, 2),
        "{b:?}"
    );
    // The claim's lease was zero long: it expired at the claim, in the past now.
    let expiry = b.next_lease_expiry.expect("a claimed row's lease");
    assert!(
        expiry <= SystemTime::now() && expiry >= received - Duration::from_secs(5),
        "next lease expiry {expiry:?}"
    );
    let age = b.oldest_pending_age(SystemTime::now());
    assert!(
        age <= SystemTime::now().duration_since(received).unwrap() + Duration::from_secs(1),
        "oldest pending age {age:?}"
    );
    assert_eq!(seen.dead_letters.len(), 1, "{seen:?}");
    let d = &seen.dead_letters[0];
    assert_eq!(
        (d.consumer.as_str(), d.reason.as_str(), d.count),
        (consumer.as_str(), "invalid_message", 1)
    );
    let newest = d.newest.expect("a failure time");
    let skew = newest
        .duration_since(received)
        .unwrap_or_else(|e| e.duration());
    assert!(skew < Duration::from_secs(60), "newest {newest:?}");
    db.finish().await;
}
