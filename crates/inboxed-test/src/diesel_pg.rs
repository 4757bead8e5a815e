//! [`DieselPg`]: PostgreSQL through diesel-async (`inboxed_postgres::diesel_pg`), a database
//! per test as for [`Pg`], migrated and written through the diesel-async store
//! alone, so that the guarantee cases run on that driver's statements and transactions.

use std::time::Duration;

use diesel::sql_types::{BigInt, Integer, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};

use inboxed_core::engine::{Columns, Engine};
use inboxed_core::{Namespace, StoreError};
use inboxed_postgres::diesel_pg::{Connection, DieselPgStore, Transaction};

use crate::backend::{Backend, LEDGER, TestDb};
use crate::pg::{Pg, drop_database, new_database};

/// PostgreSQL through diesel-async and its deadpool pool.
#[derive(Debug)]
pub struct DieselPg;

/// The store on `url` with the suite's pool size (as [`Pg`]'s).
fn connect(url: &str) -> DieselPgStore {
    DieselPgStore::connect(url, 12).expect("a diesel-async pool")
}

/// The URL without sqlx's own options.
fn plain(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// A diesel error as the backend's handler helpers return errors: carried in sqlx's error, as
/// the library carries it, so that its SQLSTATE classifies it the same way.
fn carried(e: diesel::result::Error) -> sqlx::Error {
    crate::backend::carried(StoreError::from_diesel(e))
}

/// One integer column named `n`.
#[derive(diesel::QueryableByName)]
struct Number {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

type Pooled = diesel_async::pooled_connection::deadpool::Object<AsyncPgConnection>;

async fn client(store: &DieselPgStore) -> Pooled {
    store.pool().get().await.expect("a pooled connection")
}

fn database_name(locator: &str) -> String {
    let path = plain(locator).rsplit('/').next().unwrap_or_default();
    path.to_owned()
}

impl Backend for DieselPg {
    type Store = DieselPgStore;
    const NAME: &'static str = "diesel-async";
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

    async fn attach(locator: &str) -> DieselPgStore {
        connect(plain(locator))
    }

    async fn drop_db(db: TestDb<Self>) {
        db.store.pool().close();
        drop_database(&database_name(&db.locator)).await;
    }

    async fn lock_inbox_row(store: &DieselPgStore, id: i64) -> Transaction {
        let mut tx = store.transaction().await.expect("begin");
        diesel::sql_query("SELECT id AS n FROM inboxed_inbox_messages WHERE id = $1 FOR UPDATE")
            .bind::<BigInt, _>(id)
            .load::<Number>(&mut **tx)
            .await
            .expect("lock row");
        tx
    }

    async fn block_processed_key(store: &DieselPgStore, id: &'static str) -> Transaction {
        let mut tx = store.transaction().await.expect("begin");
        diesel::sql_query(
            "SELECT 1::bigint AS n FROM inboxed_processed_messages \
             WHERE message_key = inboxed_message_key($1) FOR UPDATE",
        )
        .bind::<Text, _>(id)
        .load::<Number>(&mut **tx)
        .await
        .expect("lock key");
        tx
    }

    async fn analyze(store: &DieselPgStore) {
        client(store)
            .await
            .batch_execute("ANALYZE inboxed_processed_messages")
            .await
            .expect("analyze");
    }

    async fn age_processed(store: &DieselPgStore, prefix: &'static str, days: i64) {
        let days = i32::try_from(days).expect("days");
        diesel::sql_query(
            "UPDATE inboxed_processed_messages SET received_s = received_s - $2 * 86400
             WHERE inboxed_message_id(message_key) LIKE $1 || '%'",
        )
        .bind::<Text, _>(prefix)
        .bind::<Integer, _>(days)
        .execute(&mut client(store).await)
        .await
        .expect("age keys");
    }

    async fn namespaced(db: &TestDb<Self>) -> DieselPgStore {
        let ns = Namespace::new("tenant_a", "t2_").expect("namespace");
        DieselPgStore::with_namespace(db.store.pool().clone(), ns)
    }

    async fn make_non_durable(db: &TestDb<Self>) -> DieselPgStore {
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

    async fn execute(store: &DieselPgStore, sql: &'static str) {
        let mut client = client(store).await;
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            client.batch_execute(statement).await.expect(sql);
        }
    }

    /// Through the store's own statement type, which reads the first column whatever its
    /// integer width and whatever the statement is (a `WITH … DELETE … RETURNING`, say).
    async fn scalar(store: &DieselPgStore, sql: &'static str) -> i64 {
        let rows = store
            .fetch_alone(store.query(&std::sync::Arc::from(sql)))
            .await
            .expect(sql);
        rows.first().expect(sql).int(0).expect(sql)
    }

    async fn settled_rows(store: &DieselPgStore, id: &str) -> i64 {
        let sql = "SELECT (SELECT count(*) FROM inboxed_processed_messages \
                          WHERE message_key = inboxed_message_key($1)) \
                   + (SELECT count(*) FROM inboxed_dead_letters WHERE message_id = $1) AS n";
        diesel::sql_query(sql)
            .bind::<Text, _>(id)
            .get_result::<Number>(&mut client(store).await)
            .await
            .expect(sql)
            .n
    }

    async fn ledger_last(conn: &mut Connection, account: &str) -> Result<i64, sqlx::Error> {
        let sql = "SELECT CAST(coalesce(max(amount), 0) AS BIGINT) AS n FROM ledger \
                   WHERE account = $1";
        diesel::sql_query(sql)
            .bind::<Text, _>(account)
            .get_result::<Number>(&mut **conn)
            .await
            .map(|r| r.n)
            .map_err(carried)
    }

    async fn ledger_insert(
        conn: &mut Connection,
        id: &str,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        diesel::sql_query("INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, $3)")
            .bind::<Text, _>(id)
            .bind::<Text, _>(account)
            .bind::<BigInt, _>(amount)
            .execute(&mut **conn)
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

    /// A connection of the store's own: the store hands out its pooled connections only
    /// inside a transaction.
    async fn acquire(store: &DieselPgStore) -> impl std::ops::DerefMut<Target = Connection> + Send {
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
        let balance = diesel::sql_query("SELECT balance AS n FROM accounts WHERE id = $1")
            .bind::<Text, _>(account)
            .get_result::<Number>(&mut **conn)
            .await
            .map_err(carried)?
            .n;
        tokio::time::sleep(Duration::from_millis(2)).await;
        diesel::sql_query("UPDATE accounts SET balance = $1 WHERE id = $2")
            .bind::<BigInt, _>(balance + amount)
            .bind::<Text, _>(account)
            .execute(&mut **conn)
            .await
            .map(drop)
            .map_err(carried)
    }
}
