//! The inbox table contract (docs/inbox-contract.md), run as written: a worker made of the
//! document's own statements, no library code, claims, completes and fails rows that
//! `Inbox::store` wrote; a completion after a lost lease rolls back; the Rust worker finishes
//! the rest; the ledger shows every effect once.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use sqlx::{Connection, Row};

use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Enqueued, Inbox, Worker, WorkerConfig};
use inboxed_test::{Backend, Ledger, Pg, credit};

/// The statement after `-- contract: <name>` in the document, up to its code fence.
fn statement(name: &str) -> &'static str {
    let doc = include_str!("../../../docs/inbox-contract.md");
    let marker = format!("-- contract: {name}\n");
    let start = doc.find(&marker).expect("statement in the document") + marker.len();
    let end = start + doc[start..].find("```").expect("end of the code block");
    Box::leak(doc[start..end].to_owned().into_boxed_str())
}

const AMOUNTS: [(&str, i64); 3] = [("c-1", 5), ("c-2", 7), ("c-3", 1)];

/// The business write of the foreign worker: the same ledger row the Rust `Ledger` handler
/// writes.
async fn credit_ledger(conn: &mut sqlx::PgConnection, message_id: &str) {
    let amount = AMOUNTS.iter().find(|(id, _)| *id == message_id).unwrap().1;
    sqlx::query("INSERT INTO ledger (message_id, account, amount) VALUES ($1, 'a', $2)")
        .bind(message_id)
        .bind(amount)
        .execute(conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_worker_in_another_language_keeps_the_guarantee() {
    let db = Pg::create().await;
    let pool = db.store.pool().clone();
    let version: Option<String> = sqlx::query_scalar(
        "SELECT obj_description('inboxed_inbox_messages'::regclass, 'pg_class')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(version.as_deref(), Some("inboxed inbox contract v3"));

    let consumer = ConsumerName::new("billing").unwrap();
    let inbox = Inbox::new(db.store.clone(), consumer.clone());
    for (id, amount) in AMOUNTS {
        assert!(matches!(
            inbox.store(&credit(id, amount)).await.unwrap(),
            Enqueued::Stored { .. }
        ));
    }
    let again = inbox.store(&credit("c-1", 5)).await.unwrap();
    assert!(matches!(again, Enqueued::Duplicate));

    let claim = |token: &'static [u8], limit: i64, lease_ms: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query(statement("claim"))
                .bind("billing")
                .bind("foreign-1")
                .bind(token)
                .bind(limit)
                .bind(lease_ms)
                .fetch_all(&pool)
                .await
                .unwrap()
                .iter()
                .map(|r| r.get::<String, _>("message_id"))
                .collect::<Vec<_>>()
        }
    };
    let mut claimed = claim(b"token-one-16byte", 2, 30_000).await;
    claimed.sort();
    assert_eq!(claimed, ["c-1", "c-2"], "oldest first, up to the limit");
    // The worker knows the ids it claimed; this one asks the table for them.
    let ids_of = |token: &'static [u8]| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, Vec<i64>>(
                "SELECT array_agg(id) FROM inboxed_inbox_messages WHERE claim_token = $1",
            )
            .bind(token)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let extended = sqlx::query(statement("heartbeat"))
        .bind(&b"token-one-16byte"[..])
        .bind(60_000_i64)
        .bind(ids_of(b"token-one-16byte").await)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(extended.rows_affected(), 2);

    // c-1 processed: business write and completion in one transaction.
    let id_of = |message_id: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT id FROM inboxed_inbox_messages WHERE message_id = $1",
            )
            .bind(message_id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let mut conn = pool.acquire().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    credit_ledger(&mut tx, "c-1").await;
    let done = sqlx::query(statement("complete"))
        .bind(id_of("c-1").await)
        .bind(&b"token-one-16byte"[..])
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
    tx.commit().await.unwrap();

    // c-2 failed: back to pending with no backoff.
    let status: String = sqlx::query_scalar(statement("fail"))
        .bind(id_of("c-2").await)
        .bind(&b"token-one-16byte"[..])
        .bind("downstream unavailable")
        .bind(0_i64)
        .bind(5_i32)
        .bind(false)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(status, "pending");

    // A second claim takes c-2 and c-3 with a lease that runs out at once (the worker
    // stalled); the reap statement returns them, so the late completion of c-3 must find no
    // row and roll back.
    let mut claimed = claim(b"token-two-16byte", 10, 0).await;
    claimed.sort();
    assert_eq!(claimed, ["c-2", "c-3"]);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let reaped = sqlx::query(statement("reap"))
        .bind(5_i32)
        .bind(100_i64)
        .bind(Vec::<String>::new())
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(reaped.rows_affected(), 2);
    let mut tx = conn.begin().await.unwrap();
    credit_ledger(&mut tx, "c-3").await;
    let late = sqlx::query(statement("complete"))
        .bind(id_of("c-3").await)
        .bind(&b"token-two-16byte"[..])
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(late.rows_affected(), 0, "the lease was lost");
    tx.rollback().await.unwrap();
    drop(conn);

    // Claimed again, both come back with a group limit (their last claim died) and their
    // attempts of that claim given back (it held both: either may have killed it): the foreign
    // worker keeps the lower id alone and releases the other, whose attempt is given back again.
    let rows = sqlx::query(statement("claim"))
        .bind("billing")
        .bind("foreign-1")
        .bind(&b"token-3-16-bytes"[..])
        .bind(10_i64)
        .bind(30_000_i64)
        .fetch_all(&pool)
        .await
        .unwrap();
    let mut seen: Vec<(i64, String, i32, Option<i32>)> = rows
        .iter()
        .map(|r| {
            (
                r.get("id"),
                r.get("message_id"),
                r.get("attempts"),
                r.get("group_limit"),
            )
        })
        .collect();
    seen.sort();
    let shape: Vec<(&str, i32, Option<i32>)> = seen
        .iter()
        .map(|(_, m, a, n)| (m.as_str(), *a, *n))
        .collect();
    assert_eq!(shape, [("c-2", 2, Some(1)), ("c-3", 1, Some(1))]);
    let released = sqlx::query(statement("release"))
        .bind(&b"token-3-16-bytes"[..])
        .bind(vec![seen[1].0])
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(released.rows_affected(), 1);
    let (status, attempts): (String, i32) = sqlx::query_as(
        "SELECT status, attempts FROM inboxed_inbox_messages WHERE message_id = 'c-3'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (status.as_str(), attempts),
        ("pending", 0),
        "handed back, attempt given back"
    );
    // The foreign worker stalls on c-2 as well: the reaper returns it.
    sqlx::query(statement("heartbeat"))
        .bind(&b"token-3-16-bytes"[..])
        .bind(0_i64)
        .bind(ids_of(b"token-3-16-bytes").await)
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    sqlx::query(statement("reap"))
        .bind(5_i32)
        .bind(100_i64)
        .bind(Vec::<String>::new())
        .execute(&pool)
        .await
        .unwrap();
    let (attempts, group_limit): (i32, Option<i32>) = sqlx::query_as(
        "SELECT attempts, group_limit FROM inboxed_inbox_messages WHERE message_id = 'c-2'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (attempts, group_limit),
        (2, Some(1)),
        "held alone when its claim died: the attempt stands"
    );

    // The Rust worker finishes what is pending; c-1 is not processed again.
    let worker = Worker::new(
        db.store.clone(),
        consumer,
        Ledger::<Pg>::default(),
        WorkerConfig::default(),
    );
    // Rows whose claim died run in groups no larger than their group limit (here 1), so this
    // takes more than one batch.
    let mut done = 0;
    loop {
        let report = worker.run_once().await.unwrap();
        if report.claimed == 0 {
            break;
        }
        done += report.done;
    }
    assert_eq!(done, 2, "c-2 and c-3");
    assert_eq!(
        inboxed_test::conformance::ledger_state(&db).await,
        (3, 13),
        "each effect once"
    );
    db.finish().await;
}

/// The liveness statements, as written: a registered foreign worker that dies (its session
/// ends) is found by the probe, and the reap returns its row at once, lease or not; a live one
/// keeps its rows and its registration.
#[tokio::test]
async fn a_registered_worker_that_dies_has_its_rows_back_at_once() {
    let db = Pg::create().await;
    let pool = db.store.pool().clone();
    let inbox = Inbox::new(db.store.clone(), ConsumerName::new("billing").unwrap());
    for (id, amount) in &AMOUNTS[..2] {
        inbox.store(&credit(id, *amount)).await.unwrap();
    }
    // Each worker: its own session, registered, then one row claimed for a minute.
    let mut sessions = Vec::new();
    for (name, token) in [
        ("alive-1", b"token-live-16byt"),
        ("doomed-1", b"token-dead-16byt"),
    ] {
        let mut session = sqlx::PgConnection::connect_with(&pool.connect_options())
            .await
            .unwrap();
        let registered = sqlx::query(statement("register"))
            .bind(name)
            .execute(&mut session)
            .await
            .unwrap();
        assert_eq!(registered.rows_affected(), 1);
        let claimed = sqlx::query(statement("claim"))
            .bind("billing")
            .bind(name)
            .bind(&token[..])
            .bind(1_i64)
            .bind(60_000_i64)
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        sessions.push(session);
    }
    let dead = || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(statement("dead workers"))
                .fetch_all(&pool)
                .await
                .unwrap()
        }
    };
    assert!(dead().await.is_empty(), "both sessions are open");
    // The same name from another session gets no registration: its lock is taken.
    let mut twin = sqlx::PgConnection::connect_with(&pool.connect_options())
        .await
        .unwrap();
    let again = sqlx::query(statement("register"))
        .bind("alive-1")
        .execute(&mut twin)
        .await
        .unwrap();
    assert_eq!(again.rows_affected(), 0, "a name runs once at a time");
    twin.close().await.unwrap();
    // doomed-1's process dies: its session ends.
    sessions.pop().unwrap().close().await.unwrap();
    let mut gone = Vec::new();
    for _ in 0..50 {
        gone = dead().await;
        if !gone.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(gone, ["doomed-1"]);
    let reaped = sqlx::query(statement("reap"))
        .bind(5_i32)
        .bind(100_i64)
        .bind(&gone)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        reaped.rows_affected(),
        1,
        "the dead worker's row, lease or not"
    );
    let forgotten = sqlx::query(statement("forget workers"))
        .bind(vec!["doomed-1".to_owned(), "alive-1".to_owned()])
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        forgotten.rows_affected(),
        1,
        "the live worker's lock is held"
    );
    let states: Vec<(String, String)> = sqlx::query_as(
        "SELECT coalesce(claimed_by, ''), status FROM inboxed_inbox_messages ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        states,
        [
            ("alive-1".to_owned(), "processing".to_owned()),
            ("doomed-1".to_owned(), "pending".to_owned())
        ]
    );
    drop(sessions);
    db.finish().await;
}
