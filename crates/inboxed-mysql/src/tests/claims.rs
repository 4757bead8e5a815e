//! A batch's keys claimed in one round trip (`claim_many.sql`): every key inserted or none, so
//! that the keys read back are the batch's own; every id kept as its bytes; and the waits and
//! the check after the write that a single claim has.

use std::time::Duration;

use sqlx::{Executor, Row};

use inboxed_core::store::{BeginParams, Claim, Store};
use inboxed_core::{ConsumerName, Envelope, MessageId, PayloadHash, StoredHash};

use super::{AWKWARD_IDS, TestDb, claim_committed};
use crate::MySqlStore;

fn consumer() -> ConsumerName {
    ConsumerName::new("billing:eu-1").unwrap_or_else(|e| panic!("{e}"))
}

/// A message whose payload is its id, typed and correlated with quotes in both.
fn envelope(id: &str) -> Envelope {
    let id = MessageId::new(id).unwrap_or_else(|e| panic!("{e}"));
    let payload = id.as_str().as_bytes().to_vec();
    Envelope::new(id, payload)
        .with_type("t'ype")
        .with_correlation_id("c\"orr")
}

/// One batch claim of `ids` in a store transaction of its own, committed.
async fn claim_batch(store: &MySqlStore, ids: &[&str]) -> Vec<Claim> {
    let envelopes: Vec<Envelope> = ids.iter().map(|id| envelope(id)).collect();
    let refs: Vec<&Envelope> = envelopes.iter().collect();
    let mut tx = store
        .begin(&BeginParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let claims = store
        .claim_many(&mut tx, &consumer(), &refs)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
    claims
}

fn duplicate(id: &str) -> Claim {
    Claim::Duplicate {
        stored: Some(StoredHash::Full(PayloadHash::of(id.as_bytes()))),
    }
}

/// Ids that one collation or another would make one key, or that quoting would break, claimed
/// as a batch: each is new once; a batch of new keys and dead ones claims the new and finds the
/// dead (one only too, which the round trip leaves with no row); a batch of the first keys
/// again and new ones finds each first key a duplicate with its own payload hash (an insert
/// that skipped duplicates, rather than failing whole, would read them back as new). The rows
/// keep each id, type and correlation id as their bytes.
#[tokio::test]
async fn a_batch_claim_tells_new_keys_from_processed_and_dead_ones_byte_for_byte() {
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    let first = claim_batch(&db.store, AWKWARD_IDS).await;
    assert_eq!(first, vec![Claim::New; AWKWARD_IDS.len()]);
    db.store
        .pool()
        .execute(
            "INSERT INTO inboxed_dead_letters \
             (consumer_name, message_id, payload, reason, error, attempts, conflict_hash) \
             VALUES ('billing:eu-1', 'dead', '', 'permanent', 'the test', 1, '')",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mixed = claim_batch(&db.store, &["new-1", "dead", "new-2"]).await;
    assert_eq!(mixed, [Claim::New, Claim::DeadLettered, Claim::New]);
    assert_eq!(
        claim_batch(&db.store, &["dead"]).await,
        [Claim::DeadLettered]
    );
    let mut again: Vec<&str> = AWKWARD_IDS.to_vec();
    again.extend(["new-3", "dead"]);
    let mut want: Vec<Claim> = AWKWARD_IDS.iter().map(|id| duplicate(id)).collect();
    want.extend([Claim::New, Claim::DeadLettered]);
    assert_eq!(claim_batch(&db.store, &again).await, want);

    let rows = sqlx::query(
        "SELECT message_id, message_type, correlation_id, payload_hash \
         FROM inboxed_processed_messages WHERE consumer_name = 'billing:eu-1'",
    )
    .fetch_all(db.store.pool())
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let mut stored = Vec::new();
    for r in &rows {
        let id = String::from_utf8(r.get(0)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.get::<Option<String>, _>(1).as_deref(), Some("t'ype"));
        assert_eq!(r.get::<Option<String>, _>(2).as_deref(), Some("c\"orr"));
        let hash: Vec<u8> = r.get(3);
        assert_eq!(hash, PayloadHash::of(id.as_bytes()).as_bytes(), "{id:?}");
        stored.push(id);
    }
    stored.sort();
    let mut want: Vec<String> = AWKWARD_IDS.iter().map(|s| (*s).to_owned()).collect();
    want.extend(["new-1", "new-2", "new-3"].map(str::to_owned));
    want.sort();
    assert_eq!(stored, want);
    db.finish().await;
}

/// A key of the batch held by a concurrent, uncommitted single claim: the batch waits for it,
/// then finds it processed if that claim commits (its insert fails whole, and it claims key by
/// key), and claims it if it rolls back. Its other keys are claimed either way.
#[tokio::test]
async fn a_batch_claim_waits_for_a_concurrent_claim_of_its_key() {
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    for commit in [true, false] {
        let tag = if commit { "c" } else { "r" };
        let ids: Vec<String> = (1..=3).map(|i| format!("{tag}-{i}")).collect();
        let mut holder = db
            .store
            .begin(&BeginParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let held = envelope(&ids[1]);
        let params = inboxed_core::store::ClaimParams {
            consumer: &consumer(),
            envelope: &held,
        };
        let claim = db.store.claim(&mut holder, &params).await;
        assert_eq!(claim.unwrap_or_else(|e| panic!("{e}")), Claim::New);
        let store = db.store.clone();
        let batch_ids = ids.clone();
        let batch = tokio::spawn(async move {
            let ids: Vec<&str> = batch_ids.iter().map(String::as_str).collect();
            claim_batch(&store, &ids).await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !batch.is_finished(),
            "the batch did not wait for the claim in flight"
        );
        if commit {
            holder.commit().await.unwrap_or_else(|e| panic!("{e}"));
        } else {
            holder.rollback().await.unwrap_or_else(|e| panic!("{e}"));
        }
        let got = batch.await.unwrap_or_else(|e| panic!("{e}"));
        let middle = if commit {
            duplicate(&ids[1])
        } else {
            Claim::New
        };
        assert_eq!(
            got,
            vec![Claim::New, middle, Claim::New],
            "commit: {commit}"
        );
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_processed_messages")
            .await,
        6
    );
    db.finish().await;
}

/// A dead letter has written its row (uncommitted) when a batch claims its key: the batch's
/// insert passes the plain guard, and the locking check after the write waits for the dead
/// letter, then undoes that key's claim alone. Without the check, both would commit and the
/// key would be processed and dead.
#[tokio::test]
async fn a_batch_claim_beside_a_dead_letter_in_flight_undoes_that_key_alone() {
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    let mut letter = super::dead_letter_in_flight(&db, "billing:eu-1", "m-2").await;
    let store = db.store.clone();
    let batch = tokio::spawn(async move { claim_batch(&store, &["m-1", "m-2", "m-3"]).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !batch.is_finished(),
        "the batch's check did not wait for the dead letter in flight"
    );
    letter
        .execute("COMMIT")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got = batch.await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, [Claim::New, Claim::DeadLettered, Claim::New]);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_processed_messages")
            .await,
        2
    );
    // A single claim of a batch-claimed key finds it processed.
    let single = claim_committed(&db.store, &consumer(), &envelope("m-1")).await;
    assert_eq!(single.unwrap_or_else(|e| panic!("{e}")), duplicate("m-1"));
    drop(letter);
    db.finish().await;
}
