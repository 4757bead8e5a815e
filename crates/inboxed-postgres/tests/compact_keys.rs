//! The compact processed-key layout (docs/key-format.md, "Stored form"): ids stored as 16 bytes when they are
//! canonical UUIDs and as text otherwise, without two ids ever sharing a key; consumers stored
//! by registered id; and the oldest-key search of the partitioned table.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use inboxed_core::retention::{PartitionConfig, RetentionStore};
use inboxed_core::{ConsumerName, Outcome, Processor};
use inboxed_postgres::{PgStore, message_key};
use inboxed_test::{Backend, Ledger, Pg, TestDb, credit};

/// Seconds since 2020-01-01 UTC, the stored time's origin.
const ORIGIN: i64 = 1_577_836_800;

async fn key(db: &TestDb<Pg>, id: &str) -> Vec<u8> {
    sqlx::query_scalar("SELECT inboxed_message_key($1)")
        .bind(id)
        .fetch_one(db.store.pool())
        .await
        .unwrap()
}

async fn id_of(db: &TestDb<Pg>, key: &[u8]) -> String {
    sqlx::query_scalar("SELECT inboxed_message_id($1)")
        .bind(key)
        .fetch_one(db.store.pool())
        .await
        .unwrap()
}

/// Ids that a careless encoding would map to one key: a UUID in its canonical and other
/// spellings, and texts of exactly 16 bytes, in ASCII and in two-byte characters.
#[tokio::test]
async fn ids_get_distinct_keys_and_read_back_exactly() {
    let db = Pg::create().await;
    let uuid = "0190b3c4-5d6e-7f80-9a1b-2c3d4e5f6071";
    let ids = [
        uuid.to_owned(),
        uuid.to_uppercase(),
        uuid.replace('-', ""),
        "0123456789abcdef".to_owned(),
        "0123456789abcde".to_owned(),
        "0123456789abcdefg".to_owned(),
        "ünïcødé-16bytes".to_owned(),
        "éééééééé".to_owned(),
        "order-42".to_owned(),
    ];
    let mut keys = Vec::new();
    for id in &ids {
        let k = key(&db, id).await;
        assert_eq!(&id_of(&db, &k).await, id, "round trip of {id:?}");
        // The store encodes in Rust; operators use the SQL function. They must agree.
        assert_eq!(&*message_key(id), &k[..], "Rust and SQL disagree on {id:?}");
        keys.push(k);
    }
    assert_eq!(keys[0].len(), 16, "a canonical UUID is stored in 16 bytes");
    assert!(
        keys[1..].iter().all(|k| k.len() != 16),
        "only UUIDs take 16 bytes"
    );
    assert_eq!(keys[3].len(), 17, "a 16-byte text gets its marker byte");
    assert_eq!(keys[7].len(), 17, "16 bytes of UTF-8 in 8 characters too");
    let mut distinct = keys.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ids.len(), "two ids share a key");

    // Through the processor: each spelling is its own message, and each is deduplicated.
    let p = Processor::new(
        db.store.clone(),
        consumer("ledger"),
        Ledger::<Pg>::default(),
    );
    for id in &ids {
        assert_eq!(
            p.process(&credit(id, 1), None).await.unwrap(),
            Outcome::Processed
        );
        assert_eq!(
            p.process(&credit(id, 1), None).await.unwrap(),
            Outcome::Duplicate
        );
    }
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 9);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        9
    );
    // The keys store the consumer's id: its registry row can be neither changed nor removed.
    for change in [
        "DELETE FROM inboxed_consumers",
        "UPDATE inboxed_consumers SET name = 'other'",
        "TRUNCATE inboxed_consumers",
    ] {
        let err = sqlx::raw_sql(change)
            .execute(db.store.pool())
            .await
            .unwrap_err();
        let code = err.as_database_error().and_then(|e| e.code());
        assert_eq!(code.as_deref(), Some("23001"), "{change}: {err}");
    }
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_consumers").await, 1);
    db.finish().await;
}

fn consumer(name: &str) -> ConsumerName {
    ConsumerName::new(name).unwrap()
}

/// The partitioned table's oldest key is found by searching time through its BRIN, exactly to
/// the second, per consumer, whatever the gaps before it; the stats call reports it.
#[tokio::test]
async fn partitioned_oldest_key_is_exact_per_consumer() {
    let db = Pg::create().await;
    let day = Duration::from_secs(86_400);
    let store = PgStore::new(db.store.pool().clone())
        .partitioned(PartitionConfig::default().interval(day).ahead(1));
    store.migrate().await.unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let day_start = i64::try_from(now / 86_400 * 86_400).unwrap() - ORIGIN;
    // Consumer a: keys at +5,000 s and +7,000 s; b: one key at +100 s, then many at +3,600 s.
    let seed = format!(
        "INSERT INTO inboxed_consumers (name) VALUES ('a'), ('b');
         INSERT INTO inboxed_processed_log (consumer_id, message_key, received_s)
         SELECT (SELECT id FROM inboxed_consumers WHERE name = c), inboxed_message_key(c || g), t
         FROM (VALUES ('a', {day_start} + 5000, 1), ('a', {day_start} + 7000, 500),
                      ('b', {day_start} + 100, 1), ('b', {day_start} + 3600, 20000)) v(c, t, n),
              generate_series(1, n) g;
         ANALYZE inboxed_processed_log;"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(seed))
        .execute(db.store.pool())
        .await
        .unwrap();
    for (name, offset) in [("a", 5000), ("b", 100)] {
        let oldest: Option<i32> = sqlx::query_scalar(
            "SELECT inboxed_processed_log_oldest(id) FROM inboxed_consumers WHERE name = $1",
        )
        .bind(name)
        .fetch_one(db.store.pool())
        .await
        .unwrap();
        assert_eq!(
            oldest.map(i64::from),
            Some(day_start + offset),
            "consumer {name}"
        );
        let stats = store.processed_stats(&consumer(name)).await.unwrap();
        let at =
            UNIX_EPOCH + Duration::from_secs(u64::try_from(day_start + ORIGIN + offset).unwrap());
        assert_eq!(stats.oldest, Some(at), "stats of {name}");
    }
    let none = store.processed_stats(&consumer("nobody")).await.unwrap();
    assert_eq!((none.oldest, none.last_minute), (None, 0));
    db.finish().await;
}
