//! `inboxed partitions` against a real PostgreSQL in partitioned mode: create-ahead and list,
//! and drop-expired, which drops a partition only when every consumer with keys in it has a
//! window that has passed over it. Partitions of two seconds let real time cross their bounds.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use inboxed_core::retention::PartitionConfig;
use inboxed_core::{ConsumerName, Processor};
use inboxed_postgres::PgStore;
use inboxed_test::{Backend, Ledger, Pg, credit};

use common::inboxed;

/// `partitions create-ahead` creates the missing partitions once; `list` shows them with their
/// ranges; SQLite says it has none to manage.
#[tokio::test]
async fn partitions_are_created_ahead_and_listed() {
    let db = Pg::create().await;
    let url = db.locator.as_str();
    let ahead = [
        "partitions",
        "create-ahead",
        "--database-url",
        url,
        "--partition-interval",
        "1d",
    ];
    let (code, out) = inboxed(&ahead);
    assert_eq!(code, 0, "{out}");
    let created: usize = out
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(created >= 2, "{out}");
    assert_eq!(
        inboxed(&ahead).1,
        "created 0 partition(s) ahead\n",
        "already there"
    );
    let (code, out) = inboxed(&["partitions", "list", "--database-url", url]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("{created} partition(s)")), "{out}");
    assert_eq!(out.matches(" attached ").count(), created, "{out}");
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("p.db").display());
    assert_eq!(
        inboxed(&["partitions", "list", "--database-url", &sqlite]).0,
        2
    );
    db.finish().await;
}

/// The lock a maintenance pass takes (lock_maintenance.sql, default namespace).
const MAINTENANCE_LOCK: &str = "SELECT pg_try_advisory_lock(hashtextextended('\"public\".inboxed_processed_log maintenance', 0))";

/// Sleeps until just after the next multiple of two seconds since the epoch.
async fn next_partition() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let left = 2_000 - now.as_millis() % 2_000;
    tokio::time::sleep(Duration::from_millis(u64::try_from(left).unwrap() + 50)).await;
}

/// `drop-expired` lists first: the partition holding keys of `ledger` and `audit` stays while
/// `audit` has no window, and the dry run drops nothing; with both windows and --yes it goes.
#[tokio::test]
async fn partitions_drop_expired_only_when_every_consumer_is_done() {
    let db = Pg::create().await;
    let url = db.locator.as_str();
    let store = PgStore::new(db.store.pool().clone()).partitioned(
        PartitionConfig::default()
            .interval(Duration::from_secs(2))
            .ahead(3),
    );
    store.migrate().await.unwrap();
    next_partition().await;
    for (consumer, key) in [("ledger", "a"), ("audit", "b")] {
        let p = Processor::new(
            store.clone(),
            ConsumerName::new(consumer).unwrap(),
            Ledger::<Pg>::default(),
        );
        p.process(&credit(key, 1), None).await.unwrap();
    }
    next_partition().await;
    next_partition().await;
    let keys = "SELECT count(*) FROM inboxed_processed_log";
    let drop_expired = |extra: &[&str]| {
        let base = [
            "partitions",
            "drop-expired",
            "--database-url",
            url,
            "--partition-interval",
            "2s",
            "--horizon",
            "0s",
            "--margin",
            "0s",
            "--window",
            "ledger=2s",
        ];
        inboxed(&[&base[..], extra].concat())
    };
    let (code, out) = drop_expired(&[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("consumer `audit`, which has no window here"),
        "{out}"
    );
    assert!(out.contains("dry run:"), "{out}");
    assert_eq!(db.scalar(keys).await, 2, "a dry run drops nothing");
    let (code, out) = drop_expired(&["--yes"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        db.scalar(keys).await,
        2,
        "audit's keys keep their partition"
    );

    let (code, out) = drop_expired(&["--window", "audit=2s"]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("keep "), "{out}");
    // While another process maintains the partitions, nothing is done, and it says so.
    let mut other = db.store.pool().acquire().await.unwrap();
    let held: bool = sqlx::query_scalar(MAINTENANCE_LOCK)
        .fetch_one(&mut *other)
        .await
        .unwrap();
    assert!(held);
    let (code, out) = drop_expired(&["--window", "audit=2s", "--yes"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("another process is maintaining"), "{out}");
    assert_eq!(db.scalar(keys).await, 2, "nothing dropped");
    sqlx::query("SELECT pg_advisory_unlock_all()")
        .execute(&mut *other)
        .await
        .unwrap();
    drop(other);
    let (code, out) = drop_expired(&["--window", "audit=2s", "--yes"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("dropped "), "{out}");
    assert_eq!(db.scalar(keys).await, 0);

    // A window shorter than the horizon plus the margin is refused.
    let (code, out) = inboxed(&[
        "partitions",
        "drop-expired",
        "--database-url",
        url,
        "--partition-interval",
        "2s",
        "--horizon",
        "1d",
        "--window",
        "ledger=1h",
    ]);
    assert_eq!(code, 2, "{out}");
    db.finish().await;
}

/// The same on MariaDB: `create-ahead` carves the partitions out of `pMAX` once, `list` shows
/// them between `p1` (ids without a time) and `pMAX`, and a dry run of `drop-expired` drops
/// nothing from a fresh table.
#[tokio::test]
async fn mysql_partitions_are_created_ahead_listed_and_planned() {
    let db = inboxed_test::My::create().await;
    let url = db.locator.as_str();
    let ahead = [
        "partitions",
        "create-ahead",
        "--database-url",
        url,
        "--partition-interval",
        "1d",
    ];
    let (code, out) = inboxed(&ahead);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("created 8 partition(s) ahead"), "{out}");
    assert_eq!(
        inboxed(&ahead).1,
        "created 0 partition(s) ahead\n",
        "already there"
    );
    let (code, out) = inboxed(&["partitions", "list", "--database-url", url]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("10 partition(s)"), "{out}");
    assert!(out.starts_with("p1 ") && out.contains("\npMAX "), "{out}");
    let (code, out) = inboxed(&[
        "partitions",
        "drop-expired",
        "--database-url",
        url,
        "--partition-interval",
        "1d",
        "--window",
        "billing=30d",
        "--horizon",
        "7d",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("dry run: 0 partition(s) would be dropped, 0 kept"),
        "{out}"
    );
    db.finish().await;
}
