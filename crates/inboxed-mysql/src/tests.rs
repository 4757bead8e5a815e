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

#[tokio::test]
async fn the_local_server_passes_the_check_and_connections_read_committed() {
    let db = TestDb::new().await;
    let report = db
        .store
        .check_server()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report
            .settings
            .iter()
            .any(|(k, v)| *k == "innodb_flush_log_at_trx_commit" && v == "1")
    );
    let mut conn = db.conn().await;
    // MariaDB names it tx_isolation, MySQL 8 transaction_isolation; both answer this.
    let level: String = sqlx::query_scalar("SELECT CAST(@@SESSION.tx_isolation AS CHAR)")
        .fetch_one(&mut *conn)
        .await
        .or(
            sqlx::query_scalar("SELECT CAST(@@SESSION.transaction_isolation AS CHAR)")
                .fetch_one(&mut *conn)
                .await,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(level, "READ-COMMITTED");
    drop(conn);
    db.finish().await;
}

#[tokio::test]
async fn a_script_runs_its_statements_in_order_with_numbered_arguments_reused() {
    let db = TestDb::new().await;
    db.store
        .pool()
        .execute(
            "CREATE TABLE rows_ (id BIGINT PRIMARY KEY, owner VARBINARY(16) NULL, \
             amount BIGINT NOT NULL) ENGINE = InnoDB",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db.store
        .pool()
        .execute("INSERT INTO rows_ (id, amount) VALUES (1, 10), (2, 20), (3, 30), (4, 40)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The shape of a claim: stamp up to $2 rows with the token $1 under SKIP LOCKED, then read
    // the rows bearing it; $1 is used twice, $3 before $2.
    let sql: Arc<str> = Arc::from(
        "-- $1 token, $2 limit, $3 least amount\n\
         UPDATE rows_ SET owner = $1\n\
         WHERE id IN (SELECT id FROM (SELECT id FROM rows_ WHERE owner IS NULL AND amount >= $3\n\
                      ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) AS c);\n\
         SELECT id, amount FROM rows_ WHERE owner = $1 ORDER BY id",
    );
    let mut conn = db.conn().await;
    let rows = db
        .store
        .script(&sql)
        .bytes(b"token-a")
        .int(2)
        .int(20)
        .fetch_all(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(i64, i64)> = rows
        .iter()
        .map(|r| (r.get::<i64, _>(0), r.get::<i64, _>(1)))
        .collect();
    assert_eq!(got, vec![(2, 20), (3, 30)]);
    // A second claim skips the stamped rows and takes what is left.
    let changed = db
        .store
        .script(&sql)
        .bytes(b"token-b")
        .int(5)
        .int(0)
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        changed, 0,
        "the last statement is a SELECT: it changes nothing"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM rows_ WHERE owner = 'token-b'")
            .await,
        2
    );
    drop(conn);
    db.finish().await;
}

#[tokio::test]
async fn a_duplicate_key_is_a_unique_violation_by_its_number() {
    let db = TestDb::new().await;
    let mut conn = db.conn().await;
    conn.execute("INSERT INTO ledger VALUES ('a', 1)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let err = conn
        .execute("INSERT INTO ledger VALUES ('a', 2)")
        .await
        .map(drop)
        .map_err(StoreError::from_sqlx);
    assert!(
        matches!(err, Err(StoreError::UniqueViolation(_))),
        "{err:?}"
    );
    assert_eq!(err.err().and_then(|e| e.code()).as_deref(), Some("1062"));
    drop(conn);
    db.finish().await;
}

/// The trap: InnoDB's lock wait timeout rolls back the statement only, so a COMMIT after it
/// keeps what the transaction wrote before. The classification makes it a `Timeout`, on
/// which the library drops (rolls back) the whole transaction; this test shows both the
/// trap and the class.
#[tokio::test]
async fn a_lock_wait_timeout_is_a_timeout_and_leaves_the_transaction_open() {
    let db = TestDb::new().await;
    let mut holder = db.conn().await;
    holder
        .execute("BEGIN")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    holder
        .execute("INSERT INTO ledger VALUES ('claim', 1)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut waiter = db.conn().await;
    waiter
        .execute("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    waiter
        .execute("BEGIN")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    waiter
        .execute("INSERT INTO ledger VALUES ('business', 5)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let err = waiter
        .execute("INSERT INTO ledger VALUES ('claim', 1)")
        .await
        .map(drop)
        .map_err(StoreError::from_sqlx);
    assert!(matches!(err, Err(StoreError::Timeout(_))), "{err:?}");
    assert_eq!(err.err().and_then(|e| e.code()).as_deref(), Some("1205"));
    // The waiter's transaction is still open, its first insert in it: a COMMIT now would
    // keep the business row without the claim. Rolled back, nothing of it stays.
    let open: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ledger WHERE id = 'business'")
        .fetch_one(&mut *waiter)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(open, 1, "the statement alone was rolled back");
    waiter
        .execute("ROLLBACK")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    holder
        .execute("ROLLBACK")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(db.count("SELECT COUNT(*) FROM ledger").await, 0);
    drop((holder, waiter));
    db.finish().await;
}

/// Two transactions that lock two rows in opposite orders: InnoDB picks a victim (1213),
/// classified as a deadlock, which the library retries.
#[tokio::test]
async fn a_deadlock_is_classified_by_its_number() {
    let db = TestDb::new().await;
    db.store
        .pool()
        .execute("INSERT INTO ledger VALUES ('x', 0), ('y', 0)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut a, mut b) = (db.conn().await, db.conn().await);
    for c in [&mut a, &mut b] {
        c.execute("BEGIN").await.unwrap_or_else(|e| panic!("{e}"));
    }
    a.execute("UPDATE ledger SET amount = 1 WHERE id = 'x'")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    b.execute("UPDATE ledger SET amount = 1 WHERE id = 'y'")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first = tokio::spawn(async move {
        let r = a
            .execute("UPDATE ledger SET amount = 2 WHERE id = 'y'")
            .await
            .map(drop)
            .map_err(StoreError::from_sqlx);
        (a, r)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = b
        .execute("UPDATE ledger SET amount = 2 WHERE id = 'x'")
        .await
        .map(drop)
        .map_err(StoreError::from_sqlx);
    let (mut a, first) = first.await.unwrap_or_else(|e| panic!("{e}"));
    let victims: Vec<_> = [first, second]
        .into_iter()
        .filter_map(Result::err)
        .collect();
    assert_eq!(victims.len(), 1, "{victims:?}");
    assert!(matches!(victims[0], StoreError::Deadlock(_)), "{victims:?}");
    assert!(victims[0].is_contention());
    for c in [&mut a, &mut b] {
        c.execute("ROLLBACK")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    drop((a, b));
    db.finish().await;
}

/// Why keys are `VARBINARY`: under the server's default collation three different ids are one
/// key, and a strict `sql_mode` makes a too-long id an error instead of a silent cut.
#[tokio::test]
async fn keys_compare_as_exact_bytes_and_a_too_long_one_is_refused() {
    let db = TestDb::new().await;
    db.store
        .pool()
        .execute(
            "CREATE TABLE by_text (k VARCHAR(8) PRIMARY KEY) ENGINE = InnoDB; \
             CREATE TABLE by_bytes (k VARBINARY(8) PRIMARY KEY) ENGINE = InnoDB",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conn = db.conn().await;
    async fn stored(
        conn: &mut MySqlConnection,
        table: &'static str,
        k: &'static str,
    ) -> Result<(), StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {table} VALUES (?)"
        )))
        .bind(k)
        .execute(conn)
        .await
        .map(drop)
        .map_err(StoreError::from_sqlx)
    }
    let mut text = Vec::new();
    let mut bytes = Vec::new();
    for k in ["abc", "AbC", "AbC "] {
        text.push(stored(&mut conn, "by_text", k).await.is_ok());
        bytes.push(stored(&mut conn, "by_bytes", k).await.is_ok());
    }
    assert_eq!(
        text,
        [true, false, false],
        "the default collation folds case and pads"
    );
    assert_eq!(bytes, [true, true, true], "bytes keep three ids three keys");
    let long = stored(&mut conn, "by_bytes", "123456789").await;
    assert!(matches!(long, Err(StoreError::Database(_))), "{long:?}");
    assert_eq!(long.err().and_then(|e| e.code()).as_deref(), Some("1406"));
    drop(conn);
    db.finish().await;
}

/// Two migrators on a fresh database: one applies the migrations, the other waits on the
/// named lock and finds them applied; the lock is free afterwards (a pooled connection that
/// kept it would stall every later migrator), and a third run applies nothing.
#[tokio::test]
async fn migrators_take_turns_and_leave_the_lock_free() {
    use inboxed_core::Store;
    let db = TestDb::new().await;
    let other = MySqlStore::connect(&format!("{}/{}", server_url(), db.name), 2)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Bounded: a migrator that kept the lock on its pooled connection makes the other wait
    // for a year.
    let both = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(db.store.migrate(), other.migrate())
    });
    let (a, b) = both
        .await
        .unwrap_or_else(|_| panic!("a migrator waits on the other's lock"));
    let mut runs = [
        a.unwrap_or_else(|e| panic!("{e}")),
        b.unwrap_or_else(|e| panic!("{e}")),
    ];
    runs.sort();
    assert_eq!(runs, [vec![], vec![1]]);
    let free: i64 =
        sqlx::query_scalar("SELECT IS_FREE_LOCK(CONCAT('inboxed.migrate.', ?, '.inboxed_'))")
            .bind(&db.name)
            .fetch_one(&mut *db.conn().await)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(free, 1, "a migrator kept the named lock");
    assert_eq!(
        db.store.migrate().await.unwrap_or_else(|e| panic!("{e}")),
        Vec::<i64>::new()
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_migrations").await,
        1,
        "one record of migration 1"
    );
    other.pool().close().await;
    db.finish().await;
}

/// Why the store's connections run READ COMMITTED: under InnoDB's default REPEATABLE READ, a
/// claim's `SKIP LOCKED` scan takes gap locks, and a producer's insert into the scanned range
/// waits for the claim's transaction; under READ COMMITTED it does not wait.
#[tokio::test]
async fn a_skip_locked_claim_blocks_producers_only_under_repeatable_read() {
    let db = TestDb::new().await;
    db.store
        .pool()
        .execute(
            "CREATE TABLE queue (id BIGINT PRIMARY KEY, state VARCHAR(8) NOT NULL, \
             KEY (state, id)) ENGINE = InnoDB; \
             INSERT INTO queue VALUES (10, 'pending'), (20, 'pending'), (30, 'pending')",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut waits = Vec::new();
    for level in ["REPEATABLE READ", "READ COMMITTED"] {
        let mut claimer = db.conn().await;
        claimer
            .execute(sqlx::AssertSqlSafe(format!(
                "SET TRANSACTION ISOLATION LEVEL {level}"
            )))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        claimer
            .execute("BEGIN")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        claimer
            .execute(
                "SELECT id FROM queue WHERE state = 'pending' ORDER BY id LIMIT 2 \
                 FOR UPDATE SKIP LOCKED",
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // The producer: the store's own connection settings, with a short lock wait.
        let mut producer = db.conn().await;
        producer
            .execute("SET SESSION innodb_lock_wait_timeout = 1")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let id = if waits.is_empty() { 15 } else { 16 };
        let insert = sqlx::query("INSERT INTO queue VALUES (?, 'pending')")
            .bind(id)
            .execute(&mut *producer)
            .await
            .map_err(StoreError::from_sqlx);
        waits.push(matches!(insert, Err(StoreError::Timeout(_))));
        claimer
            .execute("ROLLBACK")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(
        waits,
        [true, false],
        "the producer's insert timed out under [REPEATABLE READ, READ COMMITTED]"
    );
    db.finish().await;
}

/// A redelivery past `max_attempts` dead-letters its key while an earlier delivery's claim of
/// the same key is still uncommitted: the dead letter's guard waits for that claim and, once it
/// commits, finds the key processed. With a plain read the guard saw nothing, and the key ended
/// both processed and dead (`inboxed demo` reported a 41st dead letter for 40 poison messages).
#[tokio::test]
async fn a_dead_letter_waits_for_an_uncommitted_claim_of_its_key() {
    use inboxed_core::store::{
        BeginParams, Claim, ClaimParams, DeadLetterParams, DeadLettered, Store,
    };
    use inboxed_core::{ConsumerName, DeadLetterReason, Envelope, MessageId};
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    let consumer = ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}"));
    let id = MessageId::new("m-1").unwrap_or_else(|e| panic!("{e}"));
    let envelope = Envelope::new(id.clone(), b"{}".to_vec());
    let mut first = db
        .store
        .begin(&BeginParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let claim = db
        .store
        .claim(
            &mut first,
            &ClaimParams {
                consumer: &consumer,
                envelope: &envelope,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(claim, Claim::New);
    let store = db.store.clone();
    let (c, i) = (consumer.clone(), id.clone());
    let late = tokio::spawn(async move {
        store
            .dead_letter(&DeadLetterParams {
                consumer: &c,
                message_id: Some(&i),
                message_type: None,
                correlation_id: None,
                payload: b"{}",
                payload_hash: None,
                reason: DeadLetterReason::AttemptsExhausted,
                error: "5 deliveries failed",
                attempts: 5,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !late.is_finished(),
        "the dead letter did not wait for the claim"
    );
    first.commit().await.unwrap_or_else(|e| panic!("{e}"));
    let settled = late
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(settled, DeadLettered::AlreadyProcessed);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_dead_letters").await,
        0
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_processed_messages")
            .await,
        1
    );
    db.finish().await;
}

/// A connection can come back to the pool inside a transaction the client never registered (a
/// task cancelled while its BEGIN was on the wire). The store's next transaction on it starts,
/// and what the stray transaction held is rolled back, never committed.
#[tokio::test]
async fn a_transaction_left_open_on_a_pooled_connection_is_rolled_back_not_committed() {
    use inboxed_core::store::{BeginParams, Store};
    let db = TestDb::new().await;
    let one = MySqlStore::connect(&format!("{}/{}", server_url(), db.name), 1)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    {
        let mut conn = one.pool().acquire().await.unwrap_or_else(|e| panic!("{e}"));
        // Raw text, so that sqlx does not know a transaction is open.
        sqlx::raw_sql("BEGIN; INSERT INTO ledger VALUES ('stray', 1)")
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let mut tx = one
        .begin(&BeginParams::default())
        .await
        .unwrap_or_else(|e| panic!("the next transaction did not start: {e}"));
    sqlx::query("INSERT INTO ledger VALUES ('mine', 2)")
        .execute(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger WHERE id = 'mine'")
            .await,
        1
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger WHERE id = 'stray'")
            .await,
        0
    );
    one.pool().close().await;
    db.finish().await;
}
