//! The purger's metrics, read back from a recorder installed for this test binary alone (a
//! process-wide recorder, hence a file of its own).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, SystemTime};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};

use inboxed_core::retention::{Purger, PurgerConfig, Retention};
use inboxed_core::{ConsumerName, Processor};
use inboxed_test::{Backend, Ledger, Pg, credit};

const DAY: Duration = Duration::from_secs(86_400);

#[tokio::test]
async fn a_pass_reports_what_it_purged_and_what_is_left() {
    let recorder = DebuggingRecorder::new();
    let snapshots = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this binary");

    let db = Pg::create().await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let p = Processor::new(db.store.clone(), consumer.clone(), Ledger::<Pg>::default());
    for i in 0..250 {
        p.process(&credit(&format!("old-{i}"), 1), None)
            .await
            .unwrap();
    }
    for i in 0..40 {
        p.process(&credit(&format!("new-{i}"), 1), None)
            .await
            .unwrap();
    }
    Pg::age_processed(&db.store, "old-", 40).await;
    let purger = Purger::new(
        db.store.clone(),
        PurgerConfig::default()
            .batch_size(100)
            .pause(Duration::from_millis(1)),
    )
    .consumer(consumer, Retention::new(30 * DAY, 7 * DAY))
    .unwrap();
    purger
        .purge_once(SystemTime::now(), |_, _| {})
        .await
        .unwrap();

    let values: Vec<(String, DebugValue)> = snapshots
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
        .collect();
    let get = |name: &str| {
        values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no {name} in {values:?}"))
    };
    assert!(matches!(
        get("inboxed_purged_rows_total"),
        DebugValue::Counter(250)
    ));
    let DebugValue::Gauge(age) = get("inboxed_oldest_key_age_seconds") else {
        panic!("a gauge")
    };
    assert!(age.into_inner() < 3_600.0, "only fresh keys left: {age}");
    let DebugValue::Gauge(growth) = get("inboxed_processed_keys_growth_per_hour") else {
        panic!("a gauge")
    };
    assert_eq!(
        growth.into_inner(),
        2_400.0,
        "40 keys in the last minute, per hour"
    );
    let DebugValue::Gauge(bytes) = get("inboxed_processed_table_bytes") else {
        panic!("a gauge")
    };
    assert!(bytes.into_inner() > 0.0);
    assert!(matches!(
        get("inboxed_purge_pass_seconds"),
        DebugValue::Histogram(h) if h.len() == 1
    ));
    db.finish().await;
}
