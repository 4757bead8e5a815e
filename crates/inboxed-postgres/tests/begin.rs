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

/// A claim whose `BEGIN` arrives while a dead letter of its key is being written (the dead
/// letter holds the key's lock, its row not yet committed) waits for it and then finds the key
/// dead, instead of claiming it beside the dead letter: the claim's shared key lock rides in
/// the `BEGIN`, so the claim statement's snapshot is taken after the dead letter committed.
#[tokio::test]
async fn a_claim_begun_beside_a_dead_letter_in_flight_finds_it_dead() {
    use inboxed_core::{ConsumerName, Outcome, Processor};
    use inboxed_postgres::key_lock::{bucket_lock, key_lock};
    use inboxed_test::handler::{Ledger, credit};

    let db = Pg::create().await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let processor = Processor::new(db.store.clone(), consumer.clone(), Ledger::<Pg>::default());
    processor.ensure_ready().await.unwrap();
    let msg = credit("m-dl", 5);
    let mut letter = db.store.pool().begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1), pg_advisory_xact_lock($2)")
        .bind(bucket_lock(&consumer, "m-dl"))
        .bind(key_lock(&consumer, "m-dl"))
        .execute(&mut *letter)
        .await
        .unwrap();
    let claim = {
        let (p, msg) = (processor.clone(), msg.clone());
        tokio::spawn(async move { p.process(&msg, Some(1)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !claim.is_finished(),
        "the claim did not wait for the dead letter in flight"
    );
    sqlx::query(
        "INSERT INTO inboxed_dead_letters \
         (consumer_name, message_id, payload, reason, error, attempts, conflict_hash) \
         VALUES ('ledger', 'm-dl', '\\x', 'attempts_exhausted', 'held by the test', 5, '\\x')",
    )
    .execute(&mut *letter)
    .await
    .unwrap();
    letter.commit().await.unwrap();
    assert_eq!(claim.await.unwrap().unwrap(), Outcome::AlreadyDeadLettered);
    assert_eq!(inboxed_test::conformance::ledger_state(&db).await, (0, 0));
    db.finish().await;
}

/// A claim given up while its `BEGIN` waits (here for a key lock a dead letter holds) leaves no
/// session inside a transaction: before sqlx 0.9.1 the pool took that connection back still in
/// it, and the next statement committed on its own on that connection (a receipt's insert) was
/// never committed, its row lock held until the session ended.
#[tokio::test]
async fn a_claim_given_up_in_its_begin_leaves_no_session_in_a_transaction() {
    use inboxed_core::{ConsumerName, Processor};
    use inboxed_postgres::key_lock::key_lock;
    use inboxed_test::handler::{Ledger, credit};

    let db = Pg::create().await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let processor = Processor::new(db.store.clone(), consumer.clone(), Ledger::<Pg>::default());
    processor.ensure_ready().await.unwrap();
    let mut letter = db.store.pool().begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(key_lock(&consumer, "m-given-up"))
        .execute(&mut *letter)
        .await
        .unwrap();
    let given_up = tokio::time::timeout(
        Duration::from_millis(300),
        processor.process(&credit("m-given-up", 5), Some(1)),
    )
    .await;
    assert!(given_up.is_err(), "the claim did not wait for the key lock");
    letter.rollback().await.unwrap();
    // Read from a session outside the pool (a pooled one could be the very session in
    // question, busy with this query); the pool takes the connection back in a task of its
    // own, so give it the time to.
    let mut watcher = <sqlx::PgConnection as sqlx::Connection>::connect(&db.locator)
        .await
        .unwrap();
    let mut in_transaction: i64 = -1;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        in_transaction = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if in_transaction == 0 {
            break;
        }
    }
    assert_eq!(
        in_transaction, 0,
        "a pooled session stayed in a transaction"
    );
    db.finish().await;
}
