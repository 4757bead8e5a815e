//! [`Pg`]: PostgreSQL, a database per test on [`admin_url`].

use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, PgConnection, PgPool};

use inboxed_core::Namespace;
use inboxed_postgres::PgStore;

use crate::backend::{Backend, LEDGER, TestDb};

/// The server the suite creates its databases on: `DATABASE_URL`, or the local default.
#[must_use]
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@localhost:5432/postgres".into())
}

/// PostgreSQL: a database per test on [`admin_url`].
#[derive(Debug)]
pub struct Pg;

impl Pg {
    async fn drop_db(db: TestDb<Self>) {
        let name = db
            .store
            .pool()
            .connect_options()
            .get_database()
            .map(str::to_owned);
        db.store.pool().close().await;
        if let Some(name) = name {
            drop_database(&name).await;
        }
    }
}

async fn admin() -> PgConnection {
    let url = admin_url();
    match PgConnection::connect(&url).await {
        Ok(c) => c,
        Err(e) => panic!(
            "PostgreSQL is required for this test and is not reachable at {url} ({e}). \
             Run scripts/test.sh, which starts one, or set DATABASE_URL."
        ),
    }
}

/// A new empty database for one test (the ones older than an hour swept first); its URL.
pub(crate) async fn new_database() -> String {
    let mut admin = admin().await;
    sweep(&mut admin).await;
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let name = format!("inboxed_test_{secs}_{:08x}", fastrand::u32(..));
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .expect("create test database");
    let options = PgConnectOptions::from_str(&admin_url())
        .expect("DATABASE_URL")
        .database(&name);
    options.to_url_lossy().to_string()
}

/// Drops database `name` of a passing test.
pub(crate) async fn drop_database(name: &str) {
    let mut admin = admin().await;
    let _ = sqlx::query(AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await;
}

async fn sweep(admin: &mut PgConnection) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'inboxed_test_%'")
            .fetch_all(&mut *admin)
            .await
            .unwrap_or_default();
    for name in names {
        let born = name
            .split('_')
            .nth(2)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        if now.saturating_sub(born) > 3600 {
            let _ = sqlx::query(AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
            )))
            .execute(&mut *admin)
            .await;
        }
    }
}

/// The library's pool options ([`PgStore::pool_options`]): the suite runs on what
/// `PgStore::connect` gives a user.
async fn pg_pool(url: &str) -> PgPool {
    PgStore::pool_options()
        .max_connections(12)
        .acquire_timeout(Duration::from_secs(30))
        .connect(url)
        .await
        .expect("connect to the test database")
}

impl Backend for Pg {
    type Store = PgStore;
    const NAME: &'static str = "postgres";
    const SERIAL_WRITERS: bool = false;
    const WORKER_LIVENESS: bool = true;
    const NOTIFIES: bool = true;
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = true;
    const NAMESPACED_PROCESSED_COUNT: &'static str =
        "SELECT count(*) FROM tenant_a.t2_processed_messages";

    async fn create() -> TestDb<Self> {
        let locator = new_database().await;
        let store = PgStore::new(pg_pool(&locator).await);
        store.migrate().await.expect("migrate");
        sqlx::raw_sql(LEDGER)
            .execute(store.pool())
            .await
            .expect("ledger tables");
        TestDb {
            store,
            locator,
            _dir: None,
        }
    }

    async fn attach(locator: &str) -> PgStore {
        PgStore::new(pg_pool(locator).await)
    }

    async fn drop_db(db: TestDb<Self>) {
        Self::drop_db(db).await;
    }

    async fn lock_inbox_row(
        store: &PgStore,
        id: i64,
    ) -> sqlx::Transaction<'static, sqlx::Postgres> {
        let mut tx = store.pool().begin().await.expect("begin");
        sqlx::query("SELECT id FROM inboxed_inbox_messages WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .expect("lock row");
        tx
    }

    async fn block_processed_key(
        store: &PgStore,
        id: &'static str,
    ) -> sqlx::Transaction<'static, sqlx::Postgres> {
        let mut tx = store.pool().begin().await.expect("begin");
        sqlx::query(
            "SELECT 1 FROM inboxed_processed_messages \
             WHERE message_key = inboxed_message_key($1) FOR UPDATE",
        )
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .expect("lock key");
        tx
    }

    async fn analyze(store: &PgStore) {
        sqlx::raw_sql("ANALYZE inboxed_processed_messages")
            .execute(store.pool())
            .await
            .expect("analyze");
    }

    async fn age_processed(store: &PgStore, prefix: &'static str, days: i64) {
        sqlx::query(
            "UPDATE inboxed_processed_messages SET received_s = received_s - $2 * 86400
             WHERE inboxed_message_id(message_key) LIKE $1 || '%'",
        )
        .bind(prefix)
        .bind(i32::try_from(days).expect("days"))
        .execute(store.pool())
        .await
        .expect("age keys");
    }

    async fn namespaced(db: &TestDb<Self>) -> PgStore {
        let ns = Namespace::new("tenant_a", "t2_").expect("namespace");
        PgStore::with_namespace(db.store.pool().clone(), ns)
    }

    async fn make_non_durable(db: &TestDb<Self>) -> PgStore {
        let name = db
            .store
            .pool()
            .connect_options()
            .get_database()
            .unwrap_or_default()
            .to_owned();
        sqlx::query(AssertSqlSafe(format!(
            "ALTER DATABASE \"{name}\" SET synchronous_commit = off"
        )))
        .execute(db.store.pool())
        .await
        .expect("alter database");
        PgStore::new(pg_pool(&db.locator).await)
    }

    async fn execute(store: &PgStore, sql: &'static str) {
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(store.pool())
                .await
                .expect(sql);
        }
    }

    async fn scalar(store: &PgStore, sql: &'static str) -> i64 {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(store.pool())
            .await
            .expect(sql)
    }

    async fn settled_rows(store: &PgStore, id: &str) -> i64 {
        let sql = "SELECT (SELECT count(*) FROM inboxed_processed_messages \
                          WHERE message_key = inboxed_message_key($1)) \
                   + (SELECT count(*) FROM inboxed_dead_letters WHERE message_id = $1)";
        sqlx::query_scalar::<_, i64>(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .expect(sql)
    }

    async fn ledger_last(conn: &mut PgConnection, account: &str) -> Result<i64, sqlx::Error> {
        let sql = "SELECT CAST(coalesce(max(amount), 0) AS BIGINT) FROM ledger WHERE account = $1";
        sqlx::query_scalar(sql)
            .bind(account)
            .fetch_one(&mut *conn)
            .await
    }

    async fn ledger_insert(
        conn: &mut PgConnection,
        id: &str,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(account)
            .bind(amount)
            .execute(&mut *conn)
            .await
            .map(drop)
    }

    async fn orphan_insert(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO fk_child (parent) VALUES (999)")
            .execute(&mut *conn)
            .await
            .map(drop)
    }

    async fn failing_statement(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        let dup = "INSERT INTO accounts (id, balance) VALUES ('a', 0)";
        sqlx::query(dup).execute(&mut *conn).await.map(drop)
    }

    async fn acquire(
        store: &PgStore,
    ) -> impl std::ops::DerefMut<Target = sqlx::PgConnection> + Send {
        store.pool().acquire().await.expect("a connection")
    }

    async fn run_on(conn: &mut PgConnection, sql: &'static str) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *conn)
            .await
            .map(drop)
    }

    async fn balance_rmw(
        conn: &mut PgConnection,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        let balance: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = $1")
            .bind(account)
            .fetch_one(&mut *conn)
            .await?;
        tokio::time::sleep(Duration::from_millis(2)).await;
        sqlx::query("UPDATE accounts SET balance = $1 WHERE id = $2")
            .bind(balance + amount)
            .bind(account)
            .execute(&mut *conn)
            .await
            .map(drop)
    }
}
