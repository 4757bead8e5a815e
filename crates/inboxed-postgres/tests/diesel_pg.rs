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
