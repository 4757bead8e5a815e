//! The server and InnoDB's traps the engine is built against: the server check, errors
//! classified by number, exact-byte keys, and the isolation level of the store's connections.

use super::*;

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

/// A connection in a transaction that inserted the ledger row `id`, and another that waits
/// at most a second for a lock.
async fn held_and_waiting(
    db: &TestDb,
    id: &str,
) -> (
    sqlx::pool::PoolConnection<sqlx::MySql>,
    sqlx::pool::PoolConnection<sqlx::MySql>,
) {
    let mut holder = db.conn().await;
    holder
        .execute("BEGIN")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    holder
        .execute(sqlx::AssertSqlSafe(format!(
            "INSERT INTO ledger VALUES ('{id}', 1)"
        )))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut waiter = db.conn().await;
    waiter
        .execute("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (holder, waiter)
}

/// A worker's row group whose handler waited out InnoDB's lock wait (1205, SQLSTATE HY000)
/// lost to a lock conflict, and is regrouped smaller rather than redone row by row: the
/// conflict is read by the one classifier, whether the handler's `?` made a `StoreError` of
/// the sqlx error or kept it as it was (`.transient()`). The worker's own classifier read
/// SQLSTATEs only, and took this one for a handler's failure.
#[tokio::test]
async fn a_lock_wait_in_a_handler_is_a_lock_conflict() {
    use inboxed_core::{HandlerError, ResultExt};
    let db = TestDb::new().await;
    let (mut holder, mut waiter) = held_and_waiting(&db, "row").await;
    let mut errors = Vec::new();
    for _ in 0..2 {
        let insert = waiter
            .execute("INSERT INTO ledger VALUES ('row', 2)")
            .await
            .map(drop);
        errors.push(insert.expect_err("the row is locked"));
    }
    let (first, second) = (errors.remove(0), errors.remove(0));
    let by_question_mark = HandlerError::from(first);
    let kept: HandlerError = Err::<(), _>(second).transient().unwrap_err();
    for e in [&by_question_mark, &kept] {
        let source = std::error::Error::source(e).unwrap_or_else(|| panic!("{e:?}"));
        assert!(StoreError::is_lock_conflict_in(source), "{e:?}");
    }
    let other = HandlerError::transient("a downstream service is unavailable");
    let source = std::error::Error::source(&other).unwrap_or_else(|| panic!("{other:?}"));
    assert!(!StoreError::is_lock_conflict_in(source));
    holder
        .execute("ROLLBACK")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    drop((holder, waiter));
    db.finish().await;
}

/// The trap: InnoDB's lock wait timeout rolls back the statement only, so a COMMIT after it
/// keeps what the transaction wrote before. The classification makes it a `Timeout`, on
/// which the library drops (rolls back) the whole transaction; this test shows both the
/// trap and the class.
#[tokio::test]
async fn a_lock_wait_timeout_is_a_timeout_and_leaves_the_transaction_open() {
    let db = TestDb::new().await;
    let (mut holder, mut waiter) = held_and_waiting(&db, "claim").await;
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
