//! [`SeaOrmPg`]: PostgreSQL through SeaORM 2 (`inboxed_postgres::sea_orm_pg`), a database per
//! test as for [`Pg`], migrated and written through the SeaORM store alone, so that the
//! guarantee cases run on SeaORM's statements and transactions.

use std::time::Duration;

use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, Value};

use inboxed_core::engine::{Columns, Engine};
use inboxed_core::{Namespace, StoreError};
use inboxed_postgres::sea_orm_pg::{Connection, SeaOrmPgStore, Transaction};

use crate::backend::{Backend, LEDGER, TestDb};
use crate::pg::{Pg, drop_database, new_database};

/// PostgreSQL through SeaORM over its sqlx pool.
#[derive(Debug)]
pub struct SeaOrmPg;

/// The store on `url` with the suite's pool size (as [`Pg`]'s).
async fn connect(url: &str) -> SeaOrmPgStore {
    SeaOrmPgStore::connect(url, 12)
        .await
        .expect("a SeaORM connection")
}

/// The URL without sqlx's own options.
fn plain(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// A SeaORM error as the backend's handler helpers return errors: the sqlx error it carries,
/// classified as the library classifies it.
fn carried(e: DbErr) -> sqlx::Error {
    crate::backend::carried(StoreError::from_sea_orm(e))
}

fn statement<const N: usize>(sql: &str, values: [Value; N]) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// The integer column `n` of the one row `sql` returns.
async fn number<C: ConnectionTrait>(conn: &C, stmt: Statement) -> Result<i64, DbErr> {
    let row = conn
        .query_one_raw(stmt)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("a row".to_owned()))?;
    row.try_get::<i64>("", "n")
}

fn database_name(locator: &str) -> String {
    let path = plain(locator).rsplit('/').next().unwrap_or_default();
    path.to_owned()
}

impl Backend for SeaOrmPg {
    type Store = SeaOrmPgStore;
    const NAME: &'static str = "SeaORM";
    const SERIAL_WRITERS: bool = false;
    const WORKER_LIVENESS: bool = true;
    const NOTIFIES: bool = true;
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = true;
    const NAMESPACED_PROCESSED_COUNT: &'static str = Pg::NAMESPACED_PROCESSED_COUNT;

    async fn create() -> TestDb<Self> {
        let locator = plain(&new_database().await).to_owned();
        let store = connect(&locator).await;
        store.migrate().await.expect("migrate");
        store
            .connection()
            .execute_unprepared(LEDGER)
            .await
            .expect("ledger tables");
        TestDb {
            store,
            locator,
            _dir: None,
        }
    }

    async fn attach(locator: &str) -> SeaOrmPgStore {
        connect(plain(locator)).await
    }

    async fn drop_db(db: TestDb<Self>) {
        db.store
            .connection()
            .get_postgres_connection_pool()
            .close()
            .await;
        drop_database(&database_name(&db.locator)).await;
    }

    async fn lock_inbox_row(store: &SeaOrmPgStore, id: i64) -> Transaction {
        let tx = store.transaction().await.expect("begin");
        tx.execute_raw(statement(
            "SELECT id FROM inboxed_inbox_messages WHERE id = $1 FOR UPDATE",
            [id.into()],
        ))
        .await
        .expect("lock row");
        tx
    }

    async fn block_processed_key(store: &SeaOrmPgStore, id: &'static str) -> Transaction {
        let tx = store.transaction().await.expect("begin");
        tx.execute_raw(statement(
            "SELECT 1 FROM inboxed_processed_messages \
             WHERE message_key = inboxed_message_key($1) FOR UPDATE",
            [id.into()],
        ))
        .await
        .expect("lock key");
        tx
    }

    async fn analyze(store: &SeaOrmPgStore) {
        store
            .connection()
            .execute_unprepared("ANALYZE inboxed_processed_messages")
            .await
            .expect("analyze");
    }

    async fn age_processed(store: &SeaOrmPgStore, prefix: &'static str, days: i64) {
        let days = i32::try_from(days).expect("days");
        store
            .connection()
            .execute_raw(statement(
                "UPDATE inboxed_processed_messages SET received_s = received_s - $2 * 86400
                 WHERE inboxed_message_id(message_key) LIKE $1 || '%'",
                [prefix.into(), days.into()],
            ))
            .await
            .expect("age keys");
    }

    async fn namespaced(db: &TestDb<Self>) -> SeaOrmPgStore {
        let ns = Namespace::new("tenant_a", "t2_").expect("namespace");
        SeaOrmPgStore::with_namespace(db.store.connection().clone(), ns).expect("a store")
    }

    async fn make_non_durable(db: &TestDb<Self>) -> SeaOrmPgStore {
        let name = database_name(&db.locator);
        db.store
            .connection()
            .execute_unprepared(&format!(
                "ALTER DATABASE \"{name}\" SET synchronous_commit = off"
            ))
            .await
            .expect("alter database");
        connect(&db.locator).await
    }

    async fn execute(store: &SeaOrmPgStore, sql: &'static str) {
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            store
                .connection()
                .execute_unprepared(statement)
                .await
                .expect(sql);
        }
    }

    /// Through the store's own statement type, which reads the first column whatever its
    /// integer width and whatever the statement is (a `WITH … DELETE … RETURNING`, say).
    async fn scalar(store: &SeaOrmPgStore, sql: &'static str) -> i64 {
        let rows = store
            .fetch_alone(store.query(&std::sync::Arc::from(sql)))
            .await
            .expect(sql);
        rows.first().expect(sql).int(0).expect(sql)
    }

    async fn settled_rows(store: &SeaOrmPgStore, id: &str) -> i64 {
        let sql = "SELECT (SELECT count(*) FROM inboxed_processed_messages \
                          WHERE message_key = inboxed_message_key($1)) \
                   + (SELECT count(*) FROM inboxed_dead_letters WHERE message_id = $1) AS n";
        number(store.connection(), statement(sql, [id.into()]))
            .await
            .expect(sql)
    }

    async fn ledger_last(conn: &mut Connection, account: &str) -> Result<i64, sqlx::Error> {
        let sql = "SELECT CAST(coalesce(max(amount), 0) AS BIGINT) AS n FROM ledger \
                   WHERE account = $1";
        number(&*conn, statement(sql, [account.into()]))
            .await
            .map_err(carried)
    }

    async fn ledger_insert(
        conn: &mut Connection,
        id: &str,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        conn.execute_raw(statement(
            "INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, $3)",
            [id.into(), account.into(), amount.into()],
        ))
        .await
        .map(drop)
        .map_err(carried)
    }

    async fn orphan_insert(conn: &mut Connection) -> Result<(), sqlx::Error> {
        conn.execute_unprepared("INSERT INTO fk_child (parent) VALUES (999)")
            .await
            .map(drop)
            .map_err(carried)
    }

    async fn failing_statement(conn: &mut Connection) -> Result<(), sqlx::Error> {
        conn.execute_unprepared("INSERT INTO accounts (id, balance) VALUES ('a', 0)")
            .await
            .map(drop)
            .map_err(carried)
    }

    /// A connection of the store's own: the store hands out its pooled connections only
    /// inside a transaction.
    async fn acquire(store: &SeaOrmPgStore) -> impl std::ops::DerefMut<Target = Connection> + Send {
        Box::new(store.session().await.expect("a connection"))
    }

    async fn run_on(conn: &mut Connection, sql: &'static str) -> Result<(), sqlx::Error> {
        conn.execute_unprepared(sql)
            .await
            .map(drop)
            .map_err(carried)
    }

    async fn balance_rmw(
        conn: &mut Connection,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        let balance = number(
            &*conn,
            statement(
                "SELECT balance AS n FROM accounts WHERE id = $1",
                [account.into()],
            ),
        )
        .await
        .map_err(carried)?;
        tokio::time::sleep(Duration::from_millis(2)).await;
        conn.execute_raw(statement(
            "UPDATE accounts SET balance = $1 WHERE id = $2",
            [(balance + amount).into(), account.into()],
        ))
        .await
        .map(drop)
        .map_err(carried)
    }
}
