//! The settings `begin` applies reach the server, for the transaction only.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use inboxed_core::Store;
use inboxed_core::store::BeginParams;
use inboxed_test::{Backend, Pg};

async fn settings(db: &inboxed_test::TestDb<Pg>, params: &BeginParams) -> (String, String) {
    let mut tx = db.store.begin(params).await.unwrap();
    let row: (String, String) = sqlx::query_as(
        "SELECT current_setting('synchronous_commit'), current_setting('statement_timeout')",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    row
}

/// Handler transactions wait for their commit's flush; maintenance batches (purges,
/// redactions), which the next pass redoes if a crash loses them, do not.
#[tokio::test]
async fn only_maintenance_batches_skip_the_commit_flush() {
    let db = Pg::create().await;
    let handler = settings(&db, &BeginParams::default()).await;
    assert_eq!(handler, ("on".to_owned(), "30s".to_owned()));
    let bounded = BeginParams::bounded(Duration::from_secs(5), Duration::from_secs(1));
    assert_eq!(
        settings(&db, &bounded).await,
        ("off".to_owned(), "5s".to_owned())
    );
    // SET LOCAL: nothing is left on the pooled connection afterwards.
    let after: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
        .fetch_one(db.store.pool())
        .await
        .unwrap();
    assert_eq!(after, "on");
    db.finish().await;
}
