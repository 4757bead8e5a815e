//! [`My`]: MySQL or MariaDB, a database per test on [`mysql_url`].

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::{AssertSqlSafe, Connection, MySqlConnection};

use inboxed_core::Namespace;
use inboxed_mysql::MySqlStore;

use crate::backend::{Backend, TestDb};

/// The server the suite creates its databases on: `INBOXED_MYSQL_URL` (no database in it), or
/// the local MariaDB as root.
#[must_use]
pub fn mysql_url() -> String {
    std::env::var("INBOXED_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into())
}

/// MySQL or MariaDB: a database per test on [`mysql_url`].
#[derive(Debug)]
pub struct My;

/// The business tables of the suite, in InnoDB. MySQL checks foreign keys at each statement
/// (it has no deferred constraints), so `fk_child` takes its orphan at the insert.
const LEDGER: &str = "CREATE TABLE ledger (message_id VARCHAR(600) CHARACTER SET utf8mb4 \
     COLLATE utf8mb4_bin NOT NULL, account VARCHAR(64) NOT NULL, amount BIGINT NOT NULL) \
     ENGINE = InnoDB;
CREATE TABLE accounts (id VARCHAR(64) PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB;
CREATE TABLE fk_parent (id BIGINT PRIMARY KEY) ENGINE = InnoDB;
CREATE TABLE fk_child (parent BIGINT, FOREIGN KEY (parent) REFERENCES fk_parent (id)) \
     ENGINE = InnoDB;
INSERT INTO accounts (id, balance) VALUES ('a', 0), ('b', 0);";

async fn admin() -> MySqlConnection {
    let url = mysql_url();
    match MySqlConnection::connect(&url).await {
        Ok(c) => c,
        Err(e) => panic!(
            "MySQL or MariaDB is required for this test and is not reachable at {url} ({e}). \
             Run scripts/test.sh, which starts one, or set INBOXED_MYSQL_URL."
        ),
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Drops the databases of failed tests older than an hour.
async fn sweep(admin: &mut MySqlConnection) {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata \
         WHERE schema_name LIKE 'inboxed\\_test\\_%'",
    )
    .fetch_all(&mut *admin)
    .await
    .unwrap_or_default();
    for name in names {
        let born = name
            .split('_')
            .nth(2)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        if now_secs().saturating_sub(born) > 3600 {
            let _ = sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
                .execute(&mut *admin)
                .await;
        }
    }
}

/// MySQL spells a 64-bit cast `SIGNED`; the suite's shared statements write `BIGINT`.
fn dialect(sql: &str) -> String {
    json_text(&sql.replace("AS BIGINT)", "AS SIGNED)"))
}

/// `column->>'key'` (PostgreSQL, SQLite and MySQL 8, not MariaDB) as
/// `JSON_UNQUOTE(JSON_EXTRACT(column, '$.key'))`, which both servers read.
fn json_text(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find("->>'") {
        let head = &rest[..at];
        let start = head
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .map_or(0, |i| i + 1);
        let after = &rest[at + 4..];
        let Some(end) = after.find('\'') else { break };
        out.push_str(&head[..start]);
        out.push_str(&format!(
            "JSON_UNQUOTE(JSON_EXTRACT({}, '$.{}'))",
            &head[start..],
            &after[..end]
        ));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

impl Backend for My {
    type Store = MySqlStore;
    const NAME: &'static str = "mysql";
    const SERIAL_WRITERS: bool = false;
    const WORKER_LIVENESS: bool = true;
    const NOTIFIES: bool = false;
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = false;
    const NAMESPACED_PROCESSED_COUNT: &'static str = "SELECT count(*) FROM t2_processed_messages";

    async fn create() -> TestDb<Self> {
        let mut admin = admin().await;
        sweep(&mut admin).await;
        let name = format!(
            "inboxed_test_{}_{}",
            now_secs(),
            uuid::Uuid::new_v4().simple()
        );
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&mut admin)
            .await
            .expect("create database");
        let locator = format!("{}/{name}", mysql_url());
        let store = Self::attach(&locator).await;
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

    async fn attach(locator: &str) -> MySqlStore {
        MySqlStore::connect(locator, 12).await.expect("connect")
    }

    async fn drop_db(db: TestDb<Self>) {
        let name = db.store.namespace().schema().to_owned();
        db.store.pool().close().await;
        let mut admin = admin().await;
        let _ = sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
            .execute(&mut admin)
            .await;
    }

    async fn lock_inbox_row(
        store: &MySqlStore,
        id: i64,
    ) -> sqlx::Transaction<'static, sqlx::MySql> {
        let mut tx = store.pool().begin().await.expect("begin");
        sqlx::query("SELECT id FROM inboxed_inbox_messages WHERE id = ? FOR UPDATE")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .expect("lock row");
        tx
    }

    async fn block_processed_key(
        store: &MySqlStore,
        id: &'static str,
    ) -> sqlx::Transaction<'static, sqlx::MySql> {
        let mut tx = store.pool().begin().await.expect("begin");
        sqlx::query("SELECT 1 FROM inboxed_processed_messages WHERE message_id = ? FOR UPDATE")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .expect("lock key");
        tx
    }

    async fn age_processed(store: &MySqlStore, prefix: &'static str, days: i64) {
        sqlx::query(
            "UPDATE inboxed_processed_messages SET received_at = received_at - INTERVAL ? DAY \
             WHERE message_id LIKE CONCAT(?, '%')",
        )
        .bind(days)
        .bind(prefix)
        .execute(store.pool())
        .await
        .expect("age keys");
    }

    async fn analyze(store: &MySqlStore) {
        sqlx::raw_sql("ANALYZE TABLE inboxed_processed_messages")
            .execute(store.pool())
            .await
            .expect("analyze");
    }

    async fn namespaced(db: &TestDb<Self>) -> MySqlStore {
        let ns = Namespace::new(db.store.namespace().schema(), "t2_").expect("namespace");
        MySqlStore::new(db.store.pool().clone(), ns)
    }

    async fn make_non_durable(_db: &TestDb<Self>) -> MySqlStore {
        // innodb_flush_log_at_trx_commit and sync_binlog are global: turning them off would
        // weaken every other test's server. The refusal is tested on inboxed_mysql::judge.
        panic!("MySQL's durability settings are global; see inboxed_mysql::judge's tests")
    }

    async fn execute(store: &MySqlStore, sql: &'static str) {
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(store.pool())
                .await
                .expect(sql);
        }
    }

    async fn scalar(store: &MySqlStore, sql: &'static str) -> i64 {
        // MySQL has no `UPDATE … RETURNING`: for a case's write that returns one row per row
        // changed (alone, or counted by `WITH x AS (… RETURNING …) SELECT count(*) FROM x`),
        // the count of rows changed stands in.
        if let Some((write, _)) = sql.split_once(" RETURNING ") {
            let write = match write.split_once(" AS (") {
                Some((with, inner)) if with.starts_with("WITH ") => inner,
                _ => write,
            };
            let done = sqlx::query(AssertSqlSafe(dialect(write)))
                .execute(store.pool())
                .await
                .expect(sql);
            return i64::try_from(done.rows_affected()).expect("a count");
        }
        sqlx::query_scalar::<_, i64>(AssertSqlSafe(dialect(sql)))
            .fetch_one(store.pool())
            .await
            .expect(sql)
    }

    async fn settled_rows(store: &MySqlStore, id: &str) -> i64 {
        let sql = "SELECT CAST((SELECT count(*) FROM inboxed_processed_messages WHERE message_id = ?) \
                   + (SELECT count(*) FROM inboxed_dead_letters WHERE message_id = ?) AS SIGNED)";
        sqlx::query_scalar::<_, i64>(sql)
            .bind(id)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .expect(sql)
    }

    async fn ledger_last(conn: &mut MySqlConnection, account: &str) -> Result<i64, sqlx::Error> {
        let sql = "SELECT CAST(coalesce(max(amount), 0) AS SIGNED) FROM ledger WHERE account = ?";
        sqlx::query_scalar(sql)
            .bind(account)
            .fetch_one(&mut *conn)
            .await
    }

    async fn ledger_insert(
        conn: &mut MySqlConnection,
        id: &str,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO ledger (message_id, account, amount) VALUES (?, ?, ?)")
            .bind(id)
            .bind(account)
            .bind(amount)
            .execute(&mut *conn)
            .await
            .map(drop)
    }

    async fn orphan_insert(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO fk_child (parent) VALUES (999)")
            .execute(&mut *conn)
            .await
            .map(drop)
    }

    async fn failing_statement(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
        let dup = "INSERT INTO accounts (id, balance) VALUES ('a', 0)";
        sqlx::query(dup).execute(&mut *conn).await.map(drop)
    }

    async fn acquire(
        store: &MySqlStore,
    ) -> impl std::ops::DerefMut<Target = sqlx::MySqlConnection> + Send {
        store.pool().acquire().await.expect("a connection")
    }

    async fn run_on(conn: &mut MySqlConnection, sql: &'static str) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *conn)
            .await
            .map(drop)
    }

    async fn balance_rmw(
        conn: &mut MySqlConnection,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        let balance: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = ?")
            .bind(account)
            .fetch_one(&mut *conn)
            .await?;
        sqlx::query("UPDATE accounts SET balance = ? WHERE id = ?")
            .bind(balance + amount)
            .bind(account)
            .execute(&mut *conn)
            .await
            .map(drop)
    }
}
