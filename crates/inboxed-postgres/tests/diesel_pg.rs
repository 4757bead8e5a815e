//! What is diesel-async's own on top of the guarantee suite (`conformance_diesel.rs`): the
//! inbox transaction is diesel's, so a handler's `conn.transaction(…)` nests as a savepoint,
//! and a savepoint left neither released nor rolled back fails the message.

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, RunQueryDsl};

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Outcome, Processor};
use inboxed_postgres::diesel_pg::{Connection, DieselPostgres};
use inboxed_test::handler::credit;
use inboxed_test::{Backend, DieselPg};

const INSERT: &str = "INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, 1)";

async fn insert(
    conn: &mut diesel_async::AsyncPgConnection,
    id: &str,
    account: &str,
) -> diesel::QueryResult<usize> {
    diesel::sql_query(INSERT)
        .bind::<Text, _>(id.to_owned())
        .bind::<Text, _>(account.to_owned())
        .execute(conn)
        .await
}

/// Writes a row inside diesel's own nested transaction whose closure fails, then one outside
/// it; or (with `abandon`) leaves a savepoint of the store's neither released nor rolled back.
#[derive(Debug, Clone, Copy)]
struct Nested {
    abandon: bool,
}

impl Handler<DieselPostgres> for Nested {
    async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        let id = msg.id().as_str().to_owned();
        let inner = id.clone();
        let failed = conn
            .transaction(async |c| -> Result<(), diesel::result::Error> {
                insert(c, &inner, "undone").await?;
                Err(diesel::result::Error::RollbackTransaction)
            })
            .await;
        assert!(failed.is_err(), "the closure's failure is returned");
        insert(conn, &id, "kept").await?;
        if self.abandon {
            let savepoint = conn.savepoint().await?;
            drop(savepoint);
        }
        Ok(())
    }
}

/// diesel's nested transaction is a savepoint in the inbox transaction: its failure undoes only
/// its own row, and the message commits with the rest. A savepoint abandoned by hand cannot be
/// committed over: the message fails and nothing of it stays.
#[tokio::test]
async fn a_nested_diesel_transaction_is_a_savepoint_and_an_abandoned_one_fails_the_message() {
    let db = DieselPg::create().await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let p = Processor::new(
        db.store.clone(),
        consumer.clone(),
        Nested { abandon: false },
    );
    p.ensure_ready().await.unwrap();
    assert_eq!(
        p.process(&credit("dn-1", 1), None).await.unwrap(),
        Outcome::Processed
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE account = 'kept'")
            .await,
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);

    let abandoning = Processor::new(db.store.clone(), consumer, Nested { abandon: true });
    assert!(abandoning.process(&credit("dn-2", 1), None).await.is_err());
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE message_id = 'dn-2'")
            .await,
        0
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        1,
        "only the first message is processed"
    );
    db.finish().await;
}

/// Gives up on a nested diesel transaction of its own half-way (a timeout inside
/// `conn.transaction(…)`, whose future is dropped with its savepoint open), then writes a row
/// and returns `Ok`.
#[derive(Debug, Clone, Copy)]
struct GivesUpInside;

impl Handler<DieselPostgres> for GivesUpInside {
    async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        let id = msg.id().as_str().to_owned();
        let inner = id.clone();
        let slow = conn.transaction(async |c| -> Result<(), diesel::result::Error> {
            insert(c, &inner, "abandoned").await?;
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            Ok(())
        });
        let timed_out = tokio::time::timeout(std::time::Duration::from_millis(50), slow).await;
        assert!(timed_out.is_err(), "the nested transaction was given up");
        insert(conn, &id, "after").await?;
        Ok(())
    }
}

/// A nested diesel transaction left open (its future dropped) cannot be committed over: diesel
/// would release the savepoint and report a commit while the transaction stayed open on a
/// pooled connection, its claim uncommitted and its key locked. The delivery fails, nothing of
/// it stays, no session is left idle in a transaction, and the key is claimed again.
#[tokio::test]
async fn a_nested_diesel_transaction_left_open_fails_the_delivery_and_holds_nothing() {
    let db = DieselPg::create().await;
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        GivesUpInside,
    );
    p.ensure_ready().await.unwrap();
    let msg = credit("dn-3", 1);
    let first = p.process(&msg, Some(1)).await;
    assert!(first.is_err(), "{first:?}");
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 0);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        0
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND state LIKE 'idle in transaction%'"
        )
        .await,
        0,
        "no connection is left inside the transaction"
    );
    // The key is not held: a redelivery claims it and fails the same way, with its attempt.
    let again = p.process(&msg, Some(2)).await;
    assert!(again.is_err(), "{again:?}");
    db.finish().await;
}

/// A savepoint abandoned inside another that is then rolled back is undone with it: the
/// transaction commits what ran after.
#[tokio::test]
async fn rolling_back_an_outer_savepoint_undoes_an_abandoned_inner_one() {
    let db = DieselPg::create().await;
    let mut tx = db.store.transaction().await.unwrap();
    let mut outer = tx.savepoint().await.unwrap();
    let mut inner = outer.savepoint().await.unwrap();
    insert(&mut inner, "sp", "inner").await.unwrap();
    drop(inner);
    outer.rollback().await.unwrap();
    insert(&mut tx, "sp", "after").await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE account = 'after'")
            .await,
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    db.finish().await;
}
