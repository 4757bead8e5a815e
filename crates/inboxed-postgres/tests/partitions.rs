//! Partitioned mode (`PgStore::partitioned`): dedup stays global across time partitions, and
//! expiry drops whole partitions. Partitions of two seconds let real time cross their
//! boundaries within a test.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Barrier;

use inboxed_core::retention::store::PurgeParams;
use inboxed_core::retention::{PartitionConfig, Purger, PurgerConfig, Retention, RetentionStore};
use inboxed_core::{
    ConsumerName, Error, Isolation, Outcome, Processor, ProcessorConfig, StoreError,
};
use inboxed_postgres::PgStore;
use inboxed_test::hooks::{HookPoint, Hooked};
use inboxed_test::{Backend, Ledger, Pg, Script, TestDb, credit};

const STEP: Duration = Duration::from_secs(2);

async fn parted(db: &TestDb<Pg>) -> PgStore {
    let store = PgStore::new(db.store.pool().clone())
        .partitioned(PartitionConfig::default().interval(STEP).ahead(3));
    store.migrate().await.unwrap();
    store
}

fn consumer() -> ConsumerName {
    ConsumerName::new("ledger").unwrap()
}

async fn ledger(db: &TestDb<Pg>) -> (i64, i64) {
    (
        db.scalar("SELECT count(*) FROM ledger").await,
        db.scalar("SELECT coalesce(sum(amount), 0)::bigint FROM ledger")
            .await,
    )
}

/// Sleeps until just after the next multiple of STEP since the epoch: the next partition.
async fn next_partition() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let step = STEP.as_millis();
    let left = step - now.as_millis() % step;
    tokio::time::sleep(Duration::from_millis(u64::try_from(left).unwrap() + 50)).await;
}

/// A key processed in one partition is still a duplicate once claims land in the next one, and
/// two deliveries racing from a barrier commit it once.
#[tokio::test]
async fn a_key_in_an_older_live_partition_is_still_a_duplicate() {
    let db = Pg::create().await;
    let store = parted(&db).await;
    let p = Processor::new(store.clone(), consumer(), Ledger::<Pg>::default());
    p.ensure_ready().await.unwrap();
    next_partition().await;
    assert_eq!(
        p.process(&credit("k-1", 5), None).await.unwrap(),
        Outcome::Processed
    );
    next_partition().await;
    assert_eq!(
        p.process(&credit("k-1", 5), None).await.unwrap(),
        Outcome::Duplicate
    );
    let older = "SELECT count(*) FROM inboxed_processed_log
                 WHERE received_s < floor(extract(epoch FROM now()) / 2) * 2 - 1577836800";
    assert_eq!(
        db.scalar(older).await,
        1,
        "one row, in a partition older than the current one"
    );

    let barrier = Arc::new(Barrier::new(2));
    let handler = Ledger::<Pg>::default();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let hooked = Hooked::new(store.clone(), barrier.clone(), HookPoint::BeforeClaim);
        let p = Processor::new(hooked, consumer(), handler.clone());
        // The holder keeps its row uncommitted for a while, so the other's probe overlaps it.
        let slow = Script {
            amount: 7,
            sleep_ms: 300,
            ..Script::default()
        }
        .message("k-2");
        tasks.push(tokio::spawn(async move { p.process(&slow, None).await }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap().unwrap());
    }
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(outcomes, vec![Outcome::Duplicate, Outcome::Processed]);
    assert_eq!(ledger(&db).await, (2, 12));
    db.finish().await;
}

/// The first delivery claims the key and holds its transaction open across a partition
/// boundary; the second arrives after it, so its row would go into the next partition, where
/// no unique index could stop it. It waits on the key lock instead, then finds the committed
/// key: applied once.
#[tokio::test]
async fn concurrent_duplicates_straddling_a_boundary_commit_once() {
    let db = Pg::create().await;
    let store = parted(&db).await;
    let handler = Ledger::<Pg>::default();
    let first = Processor::new(store.clone(), consumer(), handler.clone());
    let second = Processor::new(store.clone(), consumer(), handler.clone());
    let slow = Script {
        amount: 3,
        sleep_ms: 2_500,
        ..Script::default()
    }
    .message("k-edge");
    next_partition().await;
    let held = {
        let slow = slow.clone();
        tokio::spawn(async move { first.process(&slow, None).await })
    };
    while handler.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await; // the claim precedes the handler
    }
    next_partition().await;
    assert!(!held.is_finished(), "the first still holds its claim");
    let late = second.process(&slow, None).await.unwrap();
    assert_eq!(held.await.unwrap().unwrap(), Outcome::Processed);
    assert_eq!(late, Outcome::Duplicate);
    assert_eq!(ledger(&db).await, (1, 3));
    assert_eq!(handler.calls(), 1, "the second never ran the handler");
    db.finish().await;
}

/// Isolation levels whose snapshot predates the key lock are refused before anything is
/// written.
#[tokio::test]
async fn partitioned_mode_refuses_snapshot_isolation() {
    let db = Pg::create().await;
    let store = parted(&db).await;
    for isolation in [Isolation::RepeatableRead, Isolation::Serializable] {
        let config = ProcessorConfig::default().isolation(isolation);
        let p = Processor::with_config(store.clone(), consumer(), Ledger::<Pg>::default(), config);
        let err = p.process(&credit("k-iso", 1), None).await.unwrap_err();
        assert!(
            matches!(err, Error::Store(StoreError::Unsupported { .. })),
            "{err:?}"
        );
    }
    assert_eq!(ledger(&db).await, (0, 0));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_log")
            .await,
        0
    );
    db.finish().await;
}

/// The purger drops partitions that are wholly older than the window, keeps the rest, and
/// creates partitions ahead; a key in a dropped partition is forgotten (processed again), one
/// in a kept partition is not.
#[tokio::test]
async fn purger_drops_expired_partitions_whole() {
    let db = Pg::create().await;
    let store = parted(&db).await;
    let p = Processor::new(store.clone(), consumer(), Ledger::<Pg>::default());
    next_partition().await;
    p.process(&credit("old", 1), None).await.unwrap();
    next_partition().await;
    next_partition().await;
    p.process(&credit("new", 1), None).await.unwrap();
    let window = Retention::new(STEP, Duration::ZERO).margin(Duration::ZERO);
    let purger = Purger::new(store.clone(), PurgerConfig::default())
        .consumer(consumer(), window)
        .unwrap();
    let report = purger
        .purge_once(SystemTime::now(), |_, _| {})
        .await
        .unwrap();
    assert!(report.partitions.dropped >= 1, "{report:?}");
    assert!(
        report.partitions.longest_drop > Duration::ZERO,
        "{report:?}"
    );
    assert_eq!(report.partitions.kept, 0, "{report:?}");
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_log")
            .await,
        1,
        "the old key went with its partition, the new one stayed"
    );
    let ahead =
        "SELECT count(*) FROM pg_inherits WHERE inhparent = 'inboxed_processed_log'::regclass";
    assert!(
        db.scalar(ahead).await >= 4,
        "the current partition and 3 ahead"
    );
    assert_eq!(
        p.process(&credit("new", 1), None).await.unwrap(),
        Outcome::Duplicate
    );
    assert_eq!(
        p.process(&credit("old", 1), None).await.unwrap(),
        Outcome::Processed
    );
    assert_eq!(ledger(&db).await, (3, 3));
    let c = consumer();
    let params = PurgeParams {
        consumer: &c,
        older_than: SystemTime::now(),
        limit: 10,
        statement_timeout: Duration::from_secs(1),
        lock_timeout: Duration::from_secs(1),
    };
    let refused = store.purge_processed(&params).await;
    assert!(
        matches!(refused, Err(StoreError::Unsupported { .. })),
        "{refused:?}"
    );
    db.finish().await;
}

/// Partitions are shared by every consumer of the table: a purger that knows only some of
/// them never drops a partition holding another's keys, nor one whose keys are inside the
/// window of a consumer it knows.
#[tokio::test]
async fn partitions_holding_other_consumers_keys_are_kept() {
    let db = Pg::create().await;
    let store = parted(&db).await;
    let audit = ConsumerName::new("audit").unwrap();
    let mine = Processor::new(store.clone(), consumer(), Ledger::<Pg>::default());
    let theirs = Processor::new(store.clone(), audit.clone(), Ledger::<Pg>::default());
    next_partition().await;
    mine.process(&credit("a", 1), None).await.unwrap();
    theirs.process(&credit("b", 1), None).await.unwrap();
    next_partition().await;
    next_partition().await;
    let short = Retention::new(STEP, Duration::ZERO).margin(Duration::ZERO);
    let keys = "SELECT count(*) FROM inboxed_processed_log";
    let only_mine = Purger::new(store.clone(), PurgerConfig::default())
        .consumer(consumer(), short)
        .unwrap();
    // Empty expired partitions (made at migration, before the keys' one) may go; the keys'
    // partition may not.
    let report = only_mine
        .purge_once(SystemTime::now(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(report.partitions.kept, 1, "{report:?}");
    assert_eq!(db.scalar(keys).await, 2, "audit's key kept its partition");
    let long = Retention::new(30 * STEP, Duration::ZERO).margin(Duration::ZERO);
    let both = Purger::new(store.clone(), PurgerConfig::default())
        .consumer(consumer(), short)
        .unwrap()
        .consumer(audit.clone(), long)
        .unwrap();
    let report = both.purge_once(SystemTime::now(), |_, _| {}).await.unwrap();
    assert_eq!(
        (report.partitions.dropped, report.partitions.kept),
        (0, 1),
        "{report:?}"
    );
    assert_eq!(db.scalar(keys).await, 2, "audit's window has not passed");
    let both = Purger::new(store.clone(), PurgerConfig::default())
        .consumer(consumer(), short)
        .unwrap()
        .consumer(audit, short)
        .unwrap();
    let report = both.purge_once(SystemTime::now(), |_, _| {}).await.unwrap();
    assert_eq!(
        (report.partitions.dropped, report.partitions.kept),
        (1, 0),
        "{report:?}"
    );
    assert_eq!(db.scalar(keys).await, 0);
    db.finish().await;
}

/// A store built with another partition length continues from the last partition instead of
/// asking for an overlapping range, and claims keep working; the stats call estimates the
/// partitioned table's keys once its partitions are analyzed.
#[tokio::test]
async fn a_changed_partition_length_and_stats_keep_working() {
    let db = Pg::create().await;
    let store = parted(&db).await;
    let p = Processor::new(store.clone(), consumer(), Ledger::<Pg>::default());
    for i in 0..30 {
        p.process(&credit(&format!("s-{i}"), 1), None)
            .await
            .unwrap();
    }
    let longer = PgStore::new(db.store.pool().clone()).partitioned(
        PartitionConfig::default()
            .interval(Duration::from_secs(3))
            .ahead(6),
    );
    longer.migrate().await.unwrap();
    let q = Processor::new(longer.clone(), consumer(), Ledger::<Pg>::default());
    assert_eq!(
        q.process(&credit("s-1", 1), None).await.unwrap(),
        Outcome::Duplicate
    );
    assert_eq!(
        q.process(&credit("s-new", 1), None).await.unwrap(),
        Outcome::Processed
    );
    sqlx::raw_sql("ANALYZE inboxed_processed_log")
        .execute(db.store.pool())
        .await
        .unwrap();
    let stats = longer.processed_stats(&consumer()).await.unwrap();
    assert_eq!(stats.estimated_rows, Some(31), "{stats:?}");
    assert_eq!(stats.last_minute, 31);
    assert!(stats.table_bytes > 0 && stats.index_bytes > 0, "{stats:?}");
    db.finish().await;
}
