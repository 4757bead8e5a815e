//! The engine's first parts against the real server (`INBOXED_MYSQL_URL`, default the local
//! MariaDB as root), each test in a database of its own: the reading of multi-statement SQL
//! files, the classification of InnoDB's errors by number, and the traps the schema and the
//! connection settings are chosen against.

use std::sync::Arc;
use std::time::Duration;

use sqlx::{Connection, Executor, MySqlConnection, Row};

use inboxed_core::StoreError;
use inboxed_core::engine::Args;

use crate::MySqlStore;

fn server_url() -> String {
    std::env::var("INBOXED_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned())
}

/// A fresh database and a store on it, dropped when the test passes.
struct TestDb {
    name: String,
    store: MySqlStore,
}

impl TestDb {
    async fn new() -> Self {
        // Named as the suite's databases are, so that its sweep drops those of failed tests.
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let name = format!("inboxed_test_{secs}_{}", uuid::Uuid::new_v4().simple());
        let mut admin = MySqlConnection::connect(&server_url())
            .await
            .unwrap_or_else(|e| panic!("MariaDB at {} is needed: {e}", server_url()));
        admin
            .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let store = MySqlStore::connect(&format!("{}/{name}", server_url()), 4)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .pool()
            .execute(
                "CREATE TABLE ledger (id VARCHAR(64) PRIMARY KEY, amount BIGINT NOT NULL) \
                 ENGINE = InnoDB",
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Self { name, store }
    }

    async fn conn(&self) -> sqlx::pool::PoolConnection<sqlx::MySql> {
        self.store
            .pool()
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    async fn count(&self, sql: &'static str) -> i64 {
        sqlx::query(sql)
            .fetch_one(self.store.pool())
            .await
            .and_then(|r| r.try_get(0))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    async fn finish(self) {
        self.store.pool().close().await;
        let mut admin = MySqlConnection::connect(&server_url())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        admin
            .execute(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE `{}`",
                self.name
            )))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Ids that one collation or another would make one key (case, trailing space), or that
/// quoting would break (quotes, backslashes, placeholders, comments, control characters).
const AWKWARD_IDS: &[&str] = &[
    "abc",
    "AbC",
    "AbC ",
    "it's",
    "a\\'b",
    "\"q\"",
    "?",
    "$1",
    "x; DROP TABLE ledger; --",
    "/* c */",
    "é",
    "😀",
    "\t\n",
];

/// A dead letter of `consumer`'s key `id` written and left uncommitted on a connection of the
/// pool (returned, to commit or drop): one in flight, for a claim of the key to meet.
async fn dead_letter_in_flight(
    db: &TestDb,
    consumer: &str,
    id: &str,
) -> sqlx::pool::PoolConnection<sqlx::MySql> {
    let mut letter = db.conn().await;
    sqlx::query("BEGIN")
        .execute(&mut *letter)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    sqlx::query(
        "INSERT INTO inboxed_dead_letters \
         (consumer_name, message_id, payload, reason, error, attempts, conflict_hash) \
         VALUES (?, ?, '', 'attempts_exhausted', 'held by the test', 5, '')",
    )
    .bind(consumer)
    .bind(id)
    .execute(&mut *letter)
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    letter
}

/// One claim of `envelope` by `consumer` in a store transaction of its own, committed.
async fn claim_committed(
    store: &MySqlStore,
    consumer: &inboxed_core::ConsumerName,
    envelope: &inboxed_core::Envelope,
) -> Result<inboxed_core::store::Claim, StoreError> {
    use inboxed_core::store::{BeginParams, ClaimParams, Store};
    let mut tx = store.begin(&BeginParams::default()).await?;
    let params = ClaimParams { consumer, envelope };
    let claim = store.claim(&mut tx, &params).await?;
    tx.commit().await.map_err(StoreError::from_sqlx)?;
    Ok(claim)
}

/// The handler's turns: after locking row 1 it reports, then waits for the go-ahead to lock
/// row 2 (held by the test's transaction, which by then waits for row 1).
struct Turns {
    locked: tokio::sync::oneshot::Sender<()>,
    go: tokio::sync::oneshot::Receiver<()>,
}

impl Turns {
    /// The handler's side of [`deadlock_against`]: locks `hot` row 1 (its error is the outer
    /// one), reports, waits for the go-ahead, then locks row 2, the statement that closes the
    /// cycle; its result, a 1213 for the victim, is the inner one.
    async fn play(
        self,
        conn: &mut MySqlConnection,
    ) -> Result<Result<(), sqlx::Error>, sqlx::Error> {
        sqlx::query("UPDATE hot SET v = v + 1 WHERE id = 1")
            .execute(&mut *conn)
            .await?;
        let _ = self.locked.send(());
        let _ = self.go.await;
        Ok(sqlx::query("UPDATE hot SET v = v + 1 WHERE id = 2")
            .execute(&mut *conn)
            .await
            .map(drop))
    }
}

/// The tables of a deadlock a handler is made to lose: `hot` rows 1 and 2, and `bulk`, which
/// the other side updates first so that its transaction is the heavier one (InnoDB rolls back
/// the lighter).
async fn deadlock_tables(db: &TestDb) {
    db.store
        .pool()
        .execute(
            "CREATE TABLE hot (id INT PRIMARY KEY, v INT NOT NULL) ENGINE = InnoDB; \
             INSERT INTO hot VALUES (1, 0), (2, 0); \
             CREATE TABLE bulk (id INT PRIMARY KEY, v INT NOT NULL) ENGINE = InnoDB; \
             INSERT INTO bulk SELECT seq, 0 FROM seq_1_to_500",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The migrated store, the deadlock's tables, a table `effects` of message ids without a key
/// (a second effect shows), and messages `m-1` and `m-2` stored for consumer `billing`, which
/// is returned: the setting of a worker's batch that a handler makes lose a deadlock.
async fn two_stored_beside_a_deadlock(db: &TestDb) -> inboxed_core::ConsumerName {
    use inboxed_core::{Envelope, MessageId, inbox::Inbox};
    inboxed_core::Store::migrate(&db.store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    deadlock_tables(db).await;
    db.store
        .pool()
        .execute("CREATE TABLE effects (id VARCHAR(64) NOT NULL) ENGINE = InnoDB")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let consumer = inboxed_core::ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}"));
    let inbox = Inbox::new(db.store.clone(), consumer.clone());
    for id in ["m-1", "m-2"] {
        let id = MessageId::new(id).unwrap_or_else(|e| panic!("{e}"));
        inbox
            .store(&Envelope::new(id, b"{}".to_vec()))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    consumer
}

/// The other side of the deadlock, against a handler (running in `run`) that locks `hot` row 1,
/// reports on `locked`, and locks row 2 once `go` fires: this side holds row 2 and waits for
/// row 1, so the handler's lock of row 2 closes the cycle and its transaction, the lighter, is
/// the victim. Returns what `run` returned; this side's transaction then commits.
async fn deadlock_against<T>(
    db: &TestDb,
    locked: tokio::sync::oneshot::Receiver<()>,
    go: tokio::sync::oneshot::Sender<()>,
    run: tokio::task::JoinHandle<T>,
) -> T {
    let mut other = db.conn().await;
    other
        .execute("BEGIN; UPDATE bulk SET v = v + 1; UPDATE hot SET v = v + 1 WHERE id = 2")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    locked.await.unwrap_or_else(|e| panic!("{e}"));
    let waiter = tokio::spawn(async move {
        let r = other.execute("UPDATE hot SET v = v + 1 WHERE id = 1").await;
        (other, r.map(drop))
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = go.send(());
    let result = run.await.unwrap_or_else(|e| panic!("{e}"));
    let (mut other, waited) = waiter.await.unwrap_or_else(|e| panic!("{e}"));
    waited.unwrap_or_else(|e| panic!("{e}"));
    other
        .execute("COMMIT")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    result
}

mod claims;
mod completion;
mod gate;
mod liveness;
mod locked;
mod outbox;
mod partitions;
mod reaper;
mod receipt;
mod settle;
mod store;
mod traps;
