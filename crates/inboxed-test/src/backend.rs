//! The two real engines the suite runs on, each behind the same small trait.

use std::future::Future;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, PgConnection, PgPool, SqliteConnection};

use inboxed_core::inbox::InboxStore;
use inboxed_core::{Namespace, Store};
use inboxed_postgres::PgStore;
use inboxed_sqlite::SqliteStore;

/// The connection type a backend's handler writes through.
pub type Conn<B> = <<<B as Backend>::Store as Store>::Db as sqlx::Database>::Connection;

/// A database engine under test. Internal to the suite.
pub trait Backend: Send + Sync + Sized + 'static {
    /// The store.
    type Store: InboxStore + inboxed_core::retention::RetentionStore;
    /// Name used in test output.
    const NAME: &'static str;
    /// Writers serialize at `BEGIN` (SQLite), so a concurrent duplicate waits there, not at
    /// the claim, and the barrier belongs before `begin`.
    const SERIAL_WRITERS: bool;

    /// Whether a failed statement aborts the whole transaction (PostgreSQL) or only itself
    /// (SQLite).
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool;
    /// Counts the processed rows of the store made by [`Backend::namespaced`].
    const NAMESPACED_PROCESSED_COUNT: &'static str;

    /// A fresh, migrated database with the `ledger` and `accounts` tables.
    fn create() -> impl Future<Output = TestDb<Self>> + Send;
    /// Connects to a database created by [`Backend::create`] (from a child process).
    fn attach(locator: &str) -> impl Future<Output = Self::Store> + Send;
    /// Makes the database's commits non-durable (for the refusal test); returns a new store.
    fn make_non_durable(db: &TestDb<Self>) -> impl Future<Output = Self::Store> + Send;
    /// Locks inbox row `id` in a transaction of its own, held until the returned value drops
    /// (PostgreSQL; SQLite has no row locks and never calls it).
    fn lock_inbox_row(
        store: &Self::Store,
        id: i64,
    ) -> impl Future<Output = sqlx::Transaction<'static, <Self::Store as Store>::Db>> + Send;
    /// Blocks the purge of processed key `id` until the returned transaction drops
    /// (PostgreSQL: a row lock on it; SQLite: the database's write lock).
    fn block_processed_key(
        store: &Self::Store,
        id: &'static str,
    ) -> impl Future<Output = sqlx::Transaction<'static, <Self::Store as Store>::Db>> + Send;
    /// Moves the received time of the processed keys whose id starts with `prefix` `days`
    /// days into the past.
    fn age_processed(
        store: &Self::Store,
        prefix: &'static str,
        days: i64,
    ) -> impl Future<Output = ()> + Send;
    /// Refreshes the planner statistics of the processed-messages table.
    fn analyze(store: &Self::Store) -> impl Future<Output = ()> + Send;
    /// Removes the database of a passing test.
    fn drop_db(db: TestDb<Self>) -> impl Future<Output = ()> + Send;
    /// A store on the same database in another namespace (not migrated yet).
    fn namespaced(db: &TestDb<Self>) -> impl Future<Output = Self::Store> + Send;
    /// Runs a statement without parameters that returns one integer.
    fn scalar(store: &Self::Store, sql: &'static str) -> impl Future<Output = i64> + Send;
    /// Committed rows for `id` in the processed and dead-letter tables, seen from the pool.
    fn settled_rows(store: &Self::Store, id: &str) -> impl Future<Output = i64> + Send;
    /// The largest amount in the ledger for `account` (0 when none), inside the transaction.
    fn ledger_last(
        conn: &mut Conn<Self>,
        account: &str,
    ) -> impl Future<Output = Result<i64, sqlx::Error>> + Send;
    /// Appends a ledger row, inside the inbox transaction.
    fn ledger_insert(
        conn: &mut Conn<Self>,
        id: &str,
        account: &str,
        amount: i64,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// Inserts a row whose deferred foreign key has no parent: the statement succeeds and the
    /// transaction's COMMIT fails.
    fn orphan_insert(conn: &mut Conn<Self>)
    -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// A statement that fails (a duplicate primary key), for handlers that swallow its error.
    fn failing_statement(
        conn: &mut Conn<Self>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// Read-modify-write of an account balance, the shape that loses updates without isolation.
    fn balance_rmw(
        conn: &mut Conn<Self>,
        account: &str,
        amount: i64,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
}

/// A database for one test. Dropped after a passing test by [`TestDb::finish`]; kept after a
/// failing one (the test panics before `finish`) and swept by a later run.
#[derive(Debug)]
pub struct TestDb<B: Backend> {
    /// The migrated store.
    pub store: B::Store,
    /// How a child process finds the same database: a URL or a file path.
    pub locator: String,
    _dir: Option<tempfile::TempDir>,
}

impl<B: Backend> TestDb<B> {
    /// The same database seen as another backend of the same store type.
    pub(crate) fn retype<C: Backend<Store = B::Store>>(self) -> TestDb<C> {
        TestDb {
            store: self.store,
            locator: self.locator,
            _dir: self._dir,
        }
    }

    /// A handle on the same database as another backend of the same store type, for
    /// delegating to it (the temporary directory, if any, stays with `self`).
    pub(crate) fn view_as<C: Backend<Store = B::Store>>(&self) -> TestDb<C> {
        TestDb {
            store: self.store.clone(),
            locator: self.locator.clone(),
            _dir: None,
        }
    }

    /// Removes the database of a passing test. A failing test panics before calling this, so
    /// its database stays for inspection (PostgreSQL: swept an hour later by a later run).
    pub async fn finish(self) {
        B::drop_db(self).await;
    }

    /// Runs a scalar query.
    pub async fn scalar(&self, sql: &'static str) -> i64 {
        B::scalar(&self.store, sql).await
    }
}

const LEDGER: &str =
    "CREATE TABLE ledger (message_id TEXT NOT NULL, account TEXT NOT NULL, amount BIGINT NOT NULL);
CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL);
CREATE TABLE fk_parent (id BIGINT PRIMARY KEY);
CREATE TABLE fk_child (parent BIGINT REFERENCES fk_parent (id) DEFERRABLE INITIALLY DEFERRED);
INSERT INTO accounts (id, balance) VALUES ('a', 0), ('b', 0);";

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
            let mut admin = admin().await;
            let _ = sqlx::query(AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
            )))
            .execute(&mut admin)
            .await;
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

async fn pg_pool(url: &str) -> PgPool {
    PgPoolOptions::new()
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
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = true;
    const NAMESPACED_PROCESSED_COUNT: &'static str =
        "SELECT count(*) FROM tenant_a.t2_processed_messages";

    async fn create() -> TestDb<Self> {
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
        let locator = options.to_url_lossy().to_string();
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
        sqlx::query("SELECT 1 FROM inboxed_processed_messages WHERE message_id = $1 FOR UPDATE")
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
            "UPDATE inboxed_processed_messages SET received_at = now() - make_interval(days => $2)
             WHERE message_id LIKE $1 || '%'",
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

    async fn scalar(store: &PgStore, sql: &'static str) -> i64 {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(store.pool())
            .await
            .expect(sql)
    }

    async fn settled_rows(store: &PgStore, id: &str) -> i64 {
        let sql = "SELECT (SELECT count(*) FROM inboxed_processed_messages WHERE message_id = $1) \
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

/// SQLite: a file in a fresh temporary directory per test.
#[derive(Debug)]
pub struct Lite;

fn lite_options(path: &str, sync: SqliteSynchronous) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(sync)
        .busy_timeout(Duration::from_secs(30))
}

async fn lite_store(path: &str, sync: SqliteSynchronous) -> SqliteStore {
    let pool = SqlitePoolOptions::new()
        .max_connections(12)
        .connect_with(lite_options(path, sync))
        .await
        .expect("open sqlite file");
    SqliteStore::new(pool)
}

impl Backend for Lite {
    type Store = SqliteStore;
    const NAME: &'static str = "sqlite";
    const SERIAL_WRITERS: bool = true;
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = false;
    const NAMESPACED_PROCESSED_COUNT: &'static str = "SELECT count(*) FROM t2_processed_messages";

    async fn create() -> TestDb<Self> {
        let dir = tempfile::Builder::new()
            .prefix("inboxed_test_")
            .tempdir()
            .expect("tempdir");
        let locator = dir.path().join("inbox.db").to_string_lossy().into_owned();
        let store = lite_store(&locator, SqliteSynchronous::Full).await;
        store.migrate().await.expect("migrate");
        sqlx::raw_sql(LEDGER)
            .execute(store.pool())
            .await
            .expect("ledger tables");
        TestDb {
            store,
            locator,
            _dir: Some(dir),
        }
    }

    async fn attach(locator: &str) -> SqliteStore {
        lite_store(locator, SqliteSynchronous::Full).await
    }

    async fn drop_db(db: TestDb<Self>) {
        // The temporary directory is removed when `db` drops.
        db.store.pool().close().await;
    }

    async fn lock_inbox_row(
        store: &SqliteStore,
        _id: i64,
    ) -> sqlx::Transaction<'static, sqlx::Sqlite> {
        // No row locks in SQLite: a deferred transaction that holds nothing.
        store.pool().begin().await.expect("begin")
    }

    async fn block_processed_key(
        store: &SqliteStore,
        _id: &'static str,
    ) -> sqlx::Transaction<'static, sqlx::Sqlite> {
        let mut tx = store
            .pool()
            .begin_with("BEGIN IMMEDIATE")
            .await
            .expect("take the write lock");
        sqlx::query("SELECT 1")
            .execute(&mut *tx)
            .await
            .expect("hold");
        tx
    }

    async fn analyze(store: &SqliteStore) {
        sqlx::raw_sql("ANALYZE")
            .execute(store.pool())
            .await
            .expect("analyze");
    }

    async fn age_processed(store: &SqliteStore, prefix: &'static str, days: i64) {
        sqlx::query(
            "UPDATE inboxed_processed_messages
             SET received_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || ?2 || ' days')
             WHERE message_id LIKE ?1 || '%'",
        )
        .bind(prefix)
        .bind(days)
        .execute(store.pool())
        .await
        .expect("age keys");
    }

    async fn namespaced(db: &TestDb<Self>) -> SqliteStore {
        let ns = Namespace::new("main", "t2_").expect("namespace");
        SqliteStore::with_namespace(db.store.pool().clone(), ns)
    }

    async fn make_non_durable(db: &TestDb<Self>) -> SqliteStore {
        lite_store(&db.locator, SqliteSynchronous::Normal).await
    }

    async fn scalar(store: &SqliteStore, sql: &'static str) -> i64 {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(store.pool())
            .await
            .expect(sql)
    }

    async fn settled_rows(store: &SqliteStore, id: &str) -> i64 {
        let sql = "SELECT (SELECT count(*) FROM inboxed_processed_messages WHERE message_id = ?1) \
                   + (SELECT count(*) FROM inboxed_dead_letters WHERE message_id = ?1)";
        sqlx::query_scalar::<_, i64>(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .expect(sql)
    }

    async fn ledger_last(conn: &mut SqliteConnection, account: &str) -> Result<i64, sqlx::Error> {
        let sql = "SELECT CAST(coalesce(max(amount), 0) AS BIGINT) FROM ledger WHERE account = ?1";
        sqlx::query_scalar(sql)
            .bind(account)
            .fetch_one(&mut *conn)
            .await
    }

    async fn ledger_insert(
        conn: &mut SqliteConnection,
        id: &str,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO ledger (message_id, account, amount) VALUES (?1, ?2, ?3)")
            .bind(id)
            .bind(account)
            .bind(amount)
            .execute(&mut *conn)
            .await
            .map(drop)
    }

    async fn orphan_insert(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO fk_child (parent) VALUES (999)")
            .execute(&mut *conn)
            .await
            .map(drop)
    }

    async fn failing_statement(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        let dup = "INSERT INTO accounts (id, balance) VALUES ('a', 0)";
        sqlx::query(dup).execute(&mut *conn).await.map(drop)
    }

    async fn balance_rmw(
        conn: &mut SqliteConnection,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        let balance: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = ?1")
            .bind(account)
            .fetch_one(&mut *conn)
            .await?;
        sqlx::query("UPDATE accounts SET balance = ?1 WHERE id = ?2")
            .bind(balance + amount)
            .bind(account)
            .execute(&mut *conn)
            .await
            .map(drop)
    }
}
