//! Time partitions on MySQL (migration 6): one key always in one partition, so concurrent
//! duplicates at a boundary commit once; and the maintenance drops a partition only when every
//! key in it was received longer ago than its consumer's window.

use std::time::{Duration, SystemTime};

use inboxed_core::retention::{PartitionConfig, RetentionStore};
use inboxed_core::store::Claim;
use inboxed_core::{ConsumerName, Envelope, MessageId};

use super::*;

const DAY_MS: i64 = 24 * 3600 * 1000;

/// A partitioned store on the test's database, partitions made a day long, two ahead.
async fn parted(db: &TestDb) -> MySqlStore {
    let store = db.store.clone().partitioned(
        PartitionConfig::default()
            .interval(Duration::from_secs(24 * 3600))
            .ahead(2),
    );
    inboxed_core::Store::migrate(&store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    store
}

/// A UUIDv7 id whose time is `ms`, told apart from others of that time by `n`.
fn v7_at(ms: i64, n: u64) -> String {
    let ms = u64::try_from(ms).unwrap_or_default();
    format!("{:08x}-{:04x}-7000-8000-{:012x}", ms >> 16, ms & 0xffff, n)
}

fn now_ms() -> i64 {
    inboxed_core::inbox::store::millis(SystemTime::now())
}

/// The end of the current day, the first partition's upper bound.
fn end_of_today() -> i64 {
    now_ms().div_euclid(DAY_MS) * DAY_MS + DAY_MS
}

async fn claim(store: &MySqlStore, consumer: &str, id: &str) -> Claim {
    let consumer = ConsumerName::new(consumer).unwrap_or_else(|e| panic!("{e}"));
    let id = MessageId::new(id).unwrap_or_else(|e| panic!("{e}"));
    let envelope = Envelope::new(id, b"{}".to_vec());
    claim_committed(store, &consumer, &envelope)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Eight concurrent claims of each of four keys, whose ids' times sit on both sides of a
/// partition boundary (and one without a time): each key is claimed once and stored once, in
/// the partition of its id's time. A layout that placed a key by its receipt time, or wrote a
/// partition column that is not its id's, would let a key land twice; the table refuses the
/// latter outright.
#[tokio::test]
async fn concurrent_duplicates_at_a_partition_boundary_commit_once() {
    let db = TestDb::new().await;
    let store = parted(&db).await;
    let boundary = end_of_today();
    let keys = [
        v7_at(boundary - 1, 1),
        v7_at(boundary, 2),
        v7_at(boundary + 1, 3),
        "order-7/created".to_owned(),
    ];
    let mut tasks = Vec::new();
    for key in &keys {
        for _ in 0..8 {
            let (store, key) = (store.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                (key.clone(), claim(&store, "billing", &key).await)
            }));
        }
    }
    let mut new = std::collections::HashMap::<String, usize>::new();
    for t in tasks {
        let (key, claimed) = t.await.unwrap_or_else(|e| panic!("{e}"));
        if claimed == Claim::New {
            *new.entry(key).or_default() += 1;
        } else {
            assert!(matches!(claimed, Claim::Duplicate { .. }), "{claimed:?}");
        }
    }
    for key in &keys {
        assert_eq!(new.get(key), Some(&1), "{key} claimed once");
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_processed_log").await,
        4
    );
    let placed: Vec<(String, String)> = sqlx::query_as(
        "SELECT CONVERT(message_id USING utf8mb4), \
         (SELECT p.PARTITION_NAME FROM information_schema.PARTITIONS p \
          WHERE p.TABLE_SCHEMA = DATABASE() AND p.TABLE_NAME = 'inboxed_processed_log' \
            AND (p.PARTITION_DESCRIPTION = 'MAXVALUE' \
                 OR l.id_ms < CAST(p.PARTITION_DESCRIPTION AS SIGNED)) \
          ORDER BY p.PARTITION_ORDINAL_POSITION LIMIT 1) \
         FROM inboxed_processed_log l ORDER BY l.id_ms, l.message_id",
    )
    .fetch_all(store.pool())
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let want = [
        (keys[3].clone(), "p1".to_owned()),
        (keys[0].clone(), format!("p{boundary}")),
        (keys[1].clone(), format!("p{}", boundary + DAY_MS)),
        (keys[2].clone(), format!("p{}", boundary + DAY_MS)),
    ];
    assert_eq!(placed, want);
    // A writer that puts a key in another partition than its id's is refused (4025).
    let wrong = sqlx::query(
        "INSERT INTO inboxed_processed_log (consumer_name, message_id, id_ms) \
         VALUES ('billing', ?, 5)",
    )
    .bind(&keys[0])
    .execute(store.pool())
    .await;
    assert!(wrong.is_err(), "{wrong:?}");
    db.finish().await;
}

/// A pass ten days on, with a window of two days for `billing` only: the partition of
/// `billing`'s keys received now goes (and its key is new again); the partition holding a key
/// of `audit`, which has no window here, stays; so does the partition of a `billing` key with
/// an old id received late (its receipt within the window); empty past partitions go; the
/// current and later ones stay. Without a window, nothing goes. Another process's pass in
/// progress makes this one skip.
#[tokio::test]
async fn maintenance_drops_only_what_every_consumer_has_outlived() {
    let db = TestDb::new().await;
    let store = parted(&db).await;
    let today = end_of_today();
    let (a1, b1, a2) = (
        v7_at(today - 3_600_000, 1),
        v7_at(today + 3_600_000, 2),
        v7_at(today + DAY_MS + 3_600_000, 3),
    );
    for (consumer, id) in [("billing", &a1), ("audit", &b1), ("billing", &a2)] {
        assert_eq!(claim(&store, consumer, id).await, Claim::New);
    }
    let later = SystemTime::now() + Duration::from_secs(10 * 24 * 3600);
    let late = inboxed_core::inbox::store::millis(later) - 3_600_000;
    sqlx::query(
        "UPDATE inboxed_processed_log SET received_at = FROM_UNIXTIME(? / 1000) \
         WHERE message_id = ?",
    )
    .bind(late)
    .bind(&a2)
    .execute(store.pool())
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let billing = ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}"));
    let two_days = Duration::from_secs(2 * 24 * 3600);

    let none = store
        .maintain_partitions(later, &[])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((none.dropped, none.kept), (0, 0), "{none:?}");
    assert!(none.created >= 9, "{none:?}");

    let mut holder = db.conn().await.detach();
    sqlx::query(
        "SELECT GET_LOCK(CONCAT('inboxed/', SHA1(CONCAT('`', DATABASE(), \
         '`.inboxed_processed_log/maintenance'))), 0)",
    )
    .execute(&mut holder)
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let skipped = store
        .maintain_partitions(later, &[(billing.clone(), two_days)])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(skipped.skipped, "{skipped:?}");
    drop(holder);

    let mut report = store
        .maintain_partitions(later, &[(billing.clone(), two_days)])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..20 {
        if !report.skipped {
            break;
        }
        // The holder's session ends as its connection closes, in the background.
        tokio::time::sleep(Duration::from_millis(50)).await;
        report = store
            .maintain_partitions(later, &[(billing.clone(), two_days)])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(report.kept, 2, "{report:?}");
    assert!(report.dropped >= 6, "{report:?}");
    let names: Vec<String> = store
        .partitions()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert!(!names.contains(&format!("p{today}")), "{names:?}");
    assert!(names.contains(&format!("p{}", today + DAY_MS)), "{names:?}");
    assert!(
        names.contains(&format!("p{}", today + 2 * DAY_MS)),
        "{names:?}"
    );
    assert!(names.contains(&"p1".to_owned()) && names.contains(&"pMAX".to_owned()));
    let cutoff = inboxed_core::inbox::store::millis(later - two_days);
    let current = inboxed_core::inbox::store::millis(later).div_euclid(DAY_MS) * DAY_MS + DAY_MS;
    assert!(
        names.contains(&format!("p{current}")),
        "the current partition stays: {names:?}"
    );
    assert!(
        names.iter().all(|n| n
            .strip_prefix('p')
            .and_then(|b| b.parse::<i64>().ok())
            .is_none_or(|b| b == 1
                || b > cutoff
                || b == today + DAY_MS
                || b == today + 2 * DAY_MS)),
        "every other partition past the window went: {names:?}"
    );
    assert_eq!(
        claim(&store, "billing", &a1).await,
        Claim::New,
        "its key went with it"
    );
    assert!(matches!(
        claim(&store, "audit", &b1).await,
        Claim::Duplicate { .. }
    ));
    assert!(matches!(
        claim(&store, "billing", &a2).await,
        Claim::Duplicate { .. }
    ));
    db.finish().await;
}

/// In partitioned mode the keys of ids without a time (partition p1), which no drop reaches,
/// are purged row by row by their receipt, as on the plain table; keys of the time partitions
/// are left to their partitions.
#[tokio::test]
async fn keys_without_a_time_are_purged_by_rows_in_partitioned_mode() {
    use inboxed_core::retention::store::PurgeParams;
    let db = TestDb::new().await;
    let store = parted(&db).await;
    let timed = v7_at(now_ms(), 9);
    for id in ["plain-old", "plain-new", timed.as_str()] {
        assert_eq!(claim(&store, "billing", id).await, Claim::New);
    }
    sqlx::query(
        "UPDATE inboxed_processed_log SET received_at = received_at - INTERVAL 40 DAY \
         WHERE message_id <> 'plain-new'",
    )
    .execute(store.pool())
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let consumer = ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}"));
    assert!(store.purges_untimed_keys());
    let purged = store
        .purge_processed(&PurgeParams {
            consumer: &consumer,
            older_than: SystemTime::now() - Duration::from_secs(30 * 24 * 3600),
            limit: 100,
            statement_timeout: Duration::from_secs(5),
            lock_timeout: Duration::from_secs(1),
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(purged, 1, "the old key without a time");
    assert_eq!(claim(&store, "billing", "plain-old").await, Claim::New);
    assert!(matches!(
        claim(&store, "billing", "plain-new").await,
        Claim::Duplicate { .. }
    ));
    assert!(matches!(
        claim(&store, "billing", &timed).await,
        Claim::Duplicate { .. }
    ));
    db.finish().await;
}

/// A key claimed in an expired partition while a pass is deciding (a re-driven message with an
/// old id): the pass's first read does not see it, uncommitted; the drop holds the table, which
/// waits for the claim to commit, checks the partition again, and keeps it: the key is not
/// lost with the partition.
#[tokio::test]
async fn a_key_claimed_during_a_pass_keeps_its_partition() {
    use inboxed_core::store::{BeginParams, ClaimParams, Store};
    let db = TestDb::new().await;
    let store = parted(&db).await;
    let today = end_of_today();
    assert_eq!(
        claim(&store, "billing", &v7_at(today - 3_600_000, 1)).await,
        Claim::New
    );
    let later = SystemTime::now() + Duration::from_secs(10 * 24 * 3600);
    // The partitions up to then made first: the pass below has none to create (a creation
    // waits for the claim's transaction too, which would hide the race).
    let created = store.maintain_partitions(later, &[]).await;
    assert!(created.unwrap_or_else(|e| panic!("{e}")).created > 0);
    let late = v7_at(today - 7_200_000, 2);
    let audit = ConsumerName::new("audit").unwrap_or_else(|e| panic!("{e}"));
    let envelope = Envelope::new(
        MessageId::new(&late).unwrap_or_else(|e| panic!("{e}")),
        b"{}".to_vec(),
    );
    let mut held = store
        .begin(&BeginParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let params = ClaimParams {
        consumer: &audit,
        envelope: &envelope,
    };
    let claimed = store.claim(&mut held, &params).await;
    assert_eq!(claimed.unwrap_or_else(|e| panic!("{e}")), Claim::New);
    let billing = ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}"));
    let pass = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .maintain_partitions(later, &[(billing, Duration::from_secs(2 * 24 * 3600))])
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    held.commit().await.unwrap_or_else(|e| panic!("{e}"));
    let report = pass
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.kept >= 1, "{report:?}");
    let names: Vec<String> = store
        .partitions()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert!(names.contains(&format!("p{today}")), "{names:?}");
    assert!(matches!(
        claim(&store, "audit", &late).await,
        Claim::Duplicate { .. }
    ));
    db.finish().await;
}
