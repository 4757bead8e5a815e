//! The reapers' gate: one reaper at a time judges expired claims, and one that finds the gate
//! taken changes nothing.

use super::*;

use inboxed_core::inbox::store::{InboxStore, ReleaseStaleParams};
use inboxed_core::outbox::store::OutboxStore;

/// An expired claim of each table: an inbox row of process `w1` and an outbox row of one batch.
async fn expired_claims(db: &TestDb) {
    db.store
        .pool()
        .execute(
            "INSERT INTO inboxed_inbox_messages (consumer_name, message_id, payload, \
             payload_hash, status, received_at, available_at, attempts, claimed_by, \
             lease_expires_at, claim_token) \
             VALUES ('c', 'm-1', '', X'00', 'processing', 1, 1, 1, 'w1/1', 1, X'01'); \
             INSERT INTO inboxed_outbox_messages (message_id, destination, headers, payload, \
             status, created_at, available_at, attempts, claimed_by, lease_expires_at, \
             claim_token) VALUES ('o-1', 'd', '{}', '', 'sending', 1, 1, 1, 'r1', 1, X'02')",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// While another transaction holds a gate row, that reaper judges nothing (and, as the SQL
/// files say, locks no stale row: it reads the gate first); the other table's reaper, whose
/// gate is its own, goes on. Once the gate is free, the waiting reaper judges its row.
#[tokio::test]
async fn a_reaper_that_finds_its_gate_taken_judges_nothing() {
    let db = TestDb::new().await;
    inboxed_core::Store::migrate(&db.store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    expired_claims(&db).await;
    let params = ReleaseStaleParams {
        max_attempts: 5,
        limit: 10,
        now: None,
        dead_workers: &[],
    };
    let mut holder = db.conn().await;
    holder
        .execute("BEGIN; SELECT name FROM inboxed_locks WHERE name = 'reaper' FOR UPDATE")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let inbox = db.store.release_stale(&params).await;
    assert_eq!(
        inbox.unwrap_or_else(|e| panic!("{e}")),
        0,
        "judged without the gate"
    );
    let outbox = db.store.release_stale_outbox(5, 10, None).await;
    assert_eq!(
        outbox.unwrap_or_else(|e| panic!("{e}")),
        1,
        "the outbox's reaper waited on the inbox's gate"
    );
    holder
        .execute("ROLLBACK")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    drop(holder);
    let inbox = db.store.release_stale(&params).await;
    assert_eq!(inbox.unwrap_or_else(|e| panic!("{e}")), 1);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_inbox_messages WHERE status = 'pending'")
            .await,
        1
    );
    db.finish().await;
}
