//! A relay that keeps no sent rows deletes each confirmed row in place of marking it: fenced
//! by the claim's token as the mark is, and a deleted row counts as sent for its key.

use inboxed_core::outbox::store::{ClaimToken, OutboxStore};

use super::outbox::{claim, label, outbox_rows, write_all};
use crate::backend::Backend;

/// a1 and b1 claimed; another token deletes nothing; the claim's token deletes both; a2, behind
/// a1, is claimable next.
pub async fn outbox_delete_sent_is_fenced_and_frees_the_key<B: Backend>(_test: &str) {
    let db = B::create().await;
    write_all(&db, &[("a", 1), ("a", 2), ("b", 1)]).await;
    let t = ClaimToken::random();
    let rows = claim(&db, "relay-1", &t, 10).await;
    assert_eq!(rows.iter().map(label).collect::<Vec<_>>(), ["a1", "b1"]);
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    assert!(
        db.store
            .delete_sent(&ids, &ClaimToken::random())
            .await
            .unwrap()
            .is_empty(),
        "another claim's token deletes nothing"
    );
    let mut deleted = db.store.delete_sent(&ids, &t).await.unwrap();
    deleted.sort_unstable();
    assert_eq!(deleted, ids);
    assert_eq!(outbox_rows(&db).await, 1);
    let t2 = ClaimToken::random();
    assert_eq!(
        claim(&db, "relay-1", &t2, 10)
            .await
            .iter()
            .map(label)
            .collect::<Vec<_>>(),
        ["a2"],
        "a deleted row counts as sent for its key"
    );
    db.finish().await;
}
