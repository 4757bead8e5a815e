//! What is SeaORM's own on top of the guarantee suite (`conformance_sea_orm.rs`): the inbox
//! transaction is SeaORM's, so a handler's `conn.transaction(…)` nests as a savepoint, and one
//! given up half-way is rolled back to its savepoint while the message goes on.

use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, TransactionTrait};

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId, Outcome, Processor};
use inboxed_postgres::sea_orm_pg::{Connection, SeaOrmPgStore, SeaOrmPostgres};
use inboxed_test::handler::credit;
use inboxed_test::{Backend, SeaOrmPg};

fn insert(id: &str, account: &str) -> Statement {
    Statement::from_sql_and_values(
        DbBackend::Postgres,
        "INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, 1)",
        [id.into(), account.into()],
    )
}

/// Writes a row inside SeaORM's own nested transaction whose closure fails, then one outside
/// it.
#[derive(Debug, Clone, Copy)]
struct Nested;

impl Handler<SeaOrmPostgres> for Nested {
    async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        let id = msg.id().as_str().to_owned();
        let inner = id.clone();
        let failed = conn
            .transaction::<_, (), DbErr>(|txn| {
                Box::pin(async move {
                    txn.execute_raw(insert(&inner, "undone")).await?;
                    Err(DbErr::Custom("the closure fails".to_owned()))
                })
            })
            .await;
        assert!(failed.is_err(), "the closure's failure is returned");
        conn.execute_raw(insert(&id, "kept")).await?;
        Ok(())
    }
}

/// SeaORM's nested transaction is a savepoint in the inbox transaction: its failure undoes only
/// its own row, and the message commits with the rest, once.
#[tokio::test]
async fn a_nested_seaorm_transaction_is_a_savepoint() {
    let db = SeaOrmPg::create().await;
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Nested,
    );
    p.ensure_ready().await.unwrap();
    let msg = credit("sn-1", 1);
    assert_eq!(p.process(&msg, None).await.unwrap(), Outcome::Processed);
    assert_eq!(p.process(&msg, None).await.unwrap(), Outcome::Duplicate);
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE account = 'kept'")
            .await,
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    db.finish().await;
}

/// Gives up on a nested SeaORM transaction of its own half-way (a timeout inside
/// `conn.transaction(…)`, whose future is dropped with its savepoint open), then writes a row
/// and returns `Ok`.
#[derive(Debug, Clone, Copy)]
struct GivesUpInside;

impl Handler<SeaOrmPostgres> for GivesUpInside {
    async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        let id = msg.id().as_str().to_owned();
        let inner = id.clone();
        let slow = conn.transaction::<_, (), DbErr>(|txn| {
            Box::pin(async move {
                txn.execute_raw(insert(&inner, "abandoned")).await?;
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                Ok(())
            })
        });
        let timed_out = tokio::time::timeout(std::time::Duration::from_millis(50), slow).await;
        assert!(timed_out.is_err(), "the nested transaction was given up");
        conn.execute_raw(insert(&id, "after")).await?;
        Ok(())
    }
}

/// A nested SeaORM transaction left open (its future dropped) is rolled back to its savepoint,
/// as SeaORM rolls back any transaction it drops: the message commits what ran after, the
/// abandoned row is gone, and no session is left idle in a transaction.
#[tokio::test]
async fn a_nested_seaorm_transaction_given_up_rolls_back_to_its_savepoint() {
    let db = SeaOrmPg::create().await;
    let p = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        GivesUpInside,
    );
    p.ensure_ready().await.unwrap();
    let msg = credit("sn-2", 1);
    assert_eq!(p.process(&msg, Some(1)).await.unwrap(), Outcome::Processed);
    assert_eq!(
        db.scalar("SELECT count(*) FROM ledger WHERE account = 'after'")
            .await,
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND state LIKE 'idle in transaction%'"
        )
        .await,
        0,
        "no connection is left inside the transaction"
    );
    assert_eq!(p.process(&msg, Some(2)).await.unwrap(), Outcome::Duplicate);
    db.finish().await;
}

/// A producer's optional fields travel to the inbox as the text form of an array (sea-query
/// binds no array with NULL elements): quotes, backslashes, braces, commas, the word NULL and
/// the empty string arrive as sent, and an absent field as NULL.
#[tokio::test]
async fn optional_fields_with_array_syntax_arrive_as_sent() {
    use inboxed_core::inbox::Inbox;
    let db = SeaOrmPg::create().await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let inbox = Inbox::new(db.store.clone(), consumer);
    let awkward = ["a\"b", "c\\d", "{e,f}", "NULL", "", "é ünïcode"];
    let envelopes: Vec<Envelope> = awkward
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Envelope::new(MessageId::new(format!("af-{i}")).unwrap(), b"{}".to_vec()).with_type(*t)
        })
        .chain([Envelope::new(
            MessageId::new("af-none").unwrap(),
            b"{}".to_vec(),
        )])
        .collect();
    inbox.store_many(&envelopes).await.unwrap();
    let conn = db.store.connection();
    for (i, t) in awkward.iter().enumerate() {
        let row = conn
            .query_one_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT message_type FROM inboxed_inbox_messages WHERE message_id = $1",
                [format!("af-{i}").into()],
            ))
            .await
            .unwrap()
            .unwrap();
        let stored: Option<String> = row.try_get("", "message_type").unwrap();
        assert_eq!(stored.as_deref(), Some(*t));
    }
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_inbox_messages \
             WHERE message_id = 'af-none' AND message_type IS NULL"
        )
        .await,
        1
    );
    db.finish().await;
}

/// A SeaORM connection that is not PostgreSQL's on sqlx is refused by name.
#[test]
fn a_disconnected_seaorm_connection_is_refused() {
    let err = SeaOrmPgStore::new(sea_orm::DatabaseConnection::default()).unwrap_err();
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert!(
        source.as_deref().unwrap_or_default().contains("PostgreSQL"),
        "{err:?}"
    );
}

/// SeaORM keeps every statement prepared: a claim the library plans anew each time (the
/// lock-held batch's) sets the transaction to plan each statement for its values, so that a
/// generic plan made on an empty table is never kept; a transaction without one is left as
/// the server has it.
#[tokio::test]
async fn a_fresh_statement_in_a_seaorm_transaction_is_planned_each_time() {
    use inboxed_core::engine::{Columns, Engine};
    let db = SeaOrmPg::create().await;
    let store = &db.store;
    let mode = std::sync::Arc::from("SELECT current_setting('plan_cache_mode')");
    let one = std::sync::Arc::from("SELECT 1::bigint");

    let mut tx = store.transaction().await.unwrap();
    SeaOrmPgStore::fetch_all(store.query(&one), &mut tx)
        .await
        .unwrap();
    let rows = SeaOrmPgStore::fetch_all(store.query(&mode), &mut tx)
        .await
        .unwrap();
    assert_eq!(rows[0].text(0).unwrap(), "auto");
    tx.rollback().await.unwrap();

    let mut tx = store.transaction().await.unwrap();
    SeaOrmPgStore::fetch_all(store.fresh(&one), &mut tx)
        .await
        .unwrap();
    let rows = SeaOrmPgStore::fetch_all(store.query(&mode), &mut tx)
        .await
        .unwrap();
    assert_eq!(rows[0].text(0).unwrap(), "force_custom_plan");
    tx.rollback().await.unwrap();
    db.finish().await;
}
