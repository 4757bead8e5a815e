//! [`Lite`]: SQLite, a file in a fresh temporary directory per test.

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::time::Duration;

use sqlx::SqliteConnection;

use inboxed_core::Namespace;
use inboxed_sqlite::SqliteStore;

use crate::backend::{Backend, LEDGER, TestDb};

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

/// Where the test databases go: `INBOXED_SQLITE_TEST_DIR`, else the machine's tmpfs
/// (`/dev/shm`) when it has one, else the temporary directory. The stores sync every commit
/// (`synchronous = FULL`, as a deployment would), and on this project's CI disk that made
/// each of the concurrent conformance cases take 80 s; on tmpfs the sync returns at once and
/// everything else (the WAL, the locks, the transactions) is the same. A SIGKILLed process
/// leaves its committed pages in the kernel's cache on either, which is all the crash cases
/// need: none of them cuts the machine's power.
fn test_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("INBOXED_SQLITE_TEST_DIR") {
        return dir.into();
    }
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

impl Backend for Lite {
    type Store = SqliteStore;
    const NAME: &'static str = "sqlite";
    const SERIAL_WRITERS: bool = true;
    const WORKER_LIVENESS: bool = false;
    const NOTIFIES: bool = false;
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = false;
    const NAMESPACED_PROCESSED_COUNT: &'static str = "SELECT count(*) FROM t2_processed_messages";

    async fn create() -> TestDb<Self> {
        let dir = tempfile::Builder::new()
            .prefix("inboxed_test_")
            .tempdir_in(test_dir())
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

    async fn execute(store: &SqliteStore, sql: &'static str) {
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(store.pool())
                .await
                .expect(sql);
        }
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

    async fn acquire(
        store: &SqliteStore,
    ) -> impl std::ops::DerefMut<Target = sqlx::SqliteConnection> + Send {
        store.pool().acquire().await.expect("a connection")
    }

    async fn run_on(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *conn)
            .await
            .map(drop)
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
