//! `inboxed_lag_seconds` on PostgreSQL: a processed message's time from its sending (the
//! envelope's `sent_at`, which adapters read from the broker) to its processing; a message
//! without one, or a duplicate, records nothing.

use std::time::{Duration, SystemTime};

use inboxed_core::{ConsumerName, Processor};
use inboxed_test::{Backend, Ledger, Pg, credit};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::test]
async fn a_processed_message_records_its_lag_from_its_sending() {
    let recorder = DebuggingRecorder::new();
    let snapshots = recorder.snapshotter();
    // This thread's recorder: the test runs on a current-thread runtime.
    let _recording = metrics::set_default_local_recorder(&recorder);
    let db = Pg::create().await;
    let processor = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let sent = SystemTime::now() - Duration::from_secs(3);
    let late = credit("late", 1).with_sent_at(sent);
    processor.process(&late, Some(1)).await.unwrap();
    processor.process(&late, Some(2)).await.unwrap();
    processor
        .process(&credit("untimed", 1), Some(1))
        .await
        .unwrap();
    let lags: Vec<f64> = snapshots
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, _, _, _)| key.key().name() == "inboxed_lag_seconds")
        .flat_map(|(_, _, _, value)| match value {
            DebugValue::Histogram(values) => values
                .into_iter()
                .map(|v| v.into_inner())
                .collect::<Vec<f64>>(),
            other => panic!("a histogram, not {other:?}"),
        })
        .collect();
    assert_eq!(lags.len(), 1, "the processed message only: {lags:?}");
    assert!((3.0..10.0).contains(&lags[0]), "{lags:?}");
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 2);
    db.finish().await;
}
