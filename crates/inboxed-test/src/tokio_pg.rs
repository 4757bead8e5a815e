//! [`TokioPg`]: PostgreSQL through tokio-postgres (`inboxed_postgres::tokio_pg`), a database
//! per test as for [`Pg`], migrated and written through the tokio-postgres store
//! alone, so that the guarantee cases run on that driver's statements and transactions.

use std::time::Duration;

use inboxed_core::engine::Engine;
use inboxed_core::{Namespace, StoreError};
use inboxed_postgres::tokio_pg::{Connection, TokioPgStore, Transaction};

use crate::backend::{Backend, LEDGER, TestDb};
use crate::pg::{Pg, drop_database, new_database};

/// PostgreSQL through tokio-postgres and a deadpool-postgres pool.
#[derive(Debug)]
pub struct TokioPg;

/// The store on `url` with the suite's pool size (as [`Pg`]'s).
fn connect(url: &str) -> TokioPgStore {
    TokioPgStore::connect(url, 12).expect("a tokio-postgres pool")
}

/// The URL without sqlx's own options, which tokio-postgres does not know.
fn plain(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// A tokio-postgres error as the backend's handler helpers return errors: carried in sqlx's
/// error, as the library carries it, so that its SQLSTATE classifies it the same way.
fn carried(e: tokio_postgres::Error) -> sqlx::Error {
    crate::backend::carried(StoreError::from_tokio_postgres(e))
}

async fn client(store: &TokioPgStore) -> deadpool_postgres::Object {
    store.pool().get().await.expect("a pooled connection")
}

fn database_name(locator: &str) -> String {
    let config: tokio_postgres::Config = locator.parse().expect("the test database's URL");
    config.get_dbname().unwrap_or_default().to_owned()
}

impl Backend for TokioPg {
    type Store = TokioPgStore;
    const NAME: &'static str = "tokio-postgres";
    const SERIAL_WRITERS: bool = false;
    const WORKER_LIVENESS: bool = true;
    const NOTIFIES: bool = true;
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = true;
    const NAMESPACED_PROCESSED_COUNT: &'static str = Pg::NAMESPACED_PROCESSED_COUNT;

    async fn create() -> TestDb<Self> {
        let locator = plain(&new_database().await).to_owned();
        let store = connect(&locator);
        store.migrate().await.expect("migrate");
        client(&store)
            .await
            .batch_execute(LEDGER)
            .await
            .expect("ledger tables");
        TestDb {
            store,
            locator,
            _dir: None,
        }
    }

    async fn attach(locator: &str) -> TokioPgStore {
        connect(plain(locator))
    }

    async fn drop_db(db: TestDb<Self>) {
        db.store.pool().close();
        drop_database(&database_name(&db.locator)).await;
    }

    async fn lock_inbox_row(store: &TokioPgStore, id: i64) -> Transaction {
        let tx = store.transaction().await.expect("begin");
        tx.query_one(
            "SELECT id FROM inboxed_inbox_messages WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .await
        .expect("lock row");
        tx
    }

    async fn block_processed_key(store: &TokioPgStore, id: &'static str) -> Transaction {
        let tx = store.transaction().await.expect("begin");
        tx.query_one(
            "SELECT 1 FROM inboxed_processed_messages \
             WHERE message_key = inboxed_message_key($1) FOR UPDATE",
            &[&id],
        )
        .await
        .expect("lock key");
        tx
    }

    async fn analyze(store: &TokioPgStore) {
        client(store)
            .await
            .batch_execute("ANALYZE inboxed_processed_messages")
            .await
            .expect("analyze");
    }

    async fn age_processed(store: &TokioPgStore, prefix: &'static str, days: i64) {
        let days = i32::try_from(days).expect("days");
        client(store)
            .await
            .execute(
                "UPDATE inboxed_processed_messages SET received_s = received_s - $2 * 86400
                 WHERE inboxed_message_id(message_key) LIKE $1 || '%'",
                &[&prefix, &days],
            )
            .await
            .expect("age keys");
    }

    async fn namespaced(db: &TestDb<Self>) -> TokioPgStore {
        let ns = Namespace::new("tenant_a", "t2_").expect("namespace");
        let config: tokio_postgres::Config = db.locator.parse().expect("URL");
        TokioPgStore::with_namespace(db.store.pool().clone(), ns)
            .with_notifications(config, tokio_postgres::NoTls)
    }

    async fn make_non_durable(db: &TestDb<Self>) -> TokioPgStore {
        let name = database_name(&db.locator);
        client(&db.store)
            .await
            .batch_execute(&format!(
                "ALTER DATABASE \"{name}\" SET synchronous_commit = off"
            ))
            .await
            .expect("alter database");
        connect(&db.locator)
    }

    async fn execute(store: &TokioPgStore, sql: &'static str) {
        let client = client(store).await;
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            client.batch_execute(statement).await.expect(sql);
        }
    }

    async fn scalar(store: &TokioPgStore, sql: &'static str) -> i64 {
        client(store)
            .await
            .query_one(sql, &[])
            .await
            .expect(sql)
            .get(0)
    }

    async fn settled_rows(store: &TokioPgStore, id: &str) -> i64 {
        let sql = "SELECT (SELECT count(*) FROM inboxed_processed_messages \
                          WHERE message_key = inboxed_message_key($1)) \
                   + (SELECT count(*) FROM inboxed_dead_letters WHERE message_id = $1)";
        client(store)
            .await
            .query_one(sql, &[&id])
            .await
            .expect(sql)
            .get(0)
    }

    async fn ledger_last(conn: &mut Connection, account: &str) -> Result<i64, sqlx::Error> {
        let sql = "SELECT CAST(coalesce(max(amount), 0) AS BIGINT) FROM ledger WHERE account = $1";
        let row = conn.query_one(sql, &[&account]).await.map_err(carried)?;
        Ok(row.get(0))
    }

    async fn ledger_insert(
        conn: &mut Connection,
        id: &str,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        conn.execute(
            "INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, $3)",
            &[&id, &account, &amount],
        )
        .await
        .map(drop)
        .map_err(carried)
    }

    async fn orphan_insert(conn: &mut Connection) -> Result<(), sqlx::Error> {
        conn.batch_execute("INSERT INTO fk_child (parent) VALUES (999)")
            .await
            .map_err(carried)
    }

    async fn failing_statement(conn: &mut Connection) -> Result<(), sqlx::Error> {
        conn.batch_execute("INSERT INTO accounts (id, balance) VALUES ('a', 0)")
            .await
            .map_err(carried)
    }

    /// A connection of the store's own: tokio-postgres's store hands out its pooled
    /// connections only inside a transaction.
    async fn acquire(store: &TokioPgStore) -> impl std::ops::DerefMut<Target = Connection> + Send {
        Box::new(store.session().await.expect("a connection"))
    }

    async fn run_on(conn: &mut Connection, sql: &'static str) -> Result<(), sqlx::Error> {
        conn.batch_execute(sql).await.map_err(carried)
    }

    async fn balance_rmw(
        conn: &mut Connection,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        let balance: i64 = conn
            .query_one("SELECT balance FROM accounts WHERE id = $1", &[&account])
            .await
            .map_err(carried)?
            .get(0);
        tokio::time::sleep(Duration::from_millis(2)).await;
        conn.execute(
            "UPDATE accounts SET balance = $1 WHERE id = $2",
            &[&(balance + amount), &account],
        )
        .await
        .map(drop)
        .map_err(carried)
    }
}
