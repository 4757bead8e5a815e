//! Retention of processed keys: the bounded purge, its timeouts, and the stats call.

use std::time::{Duration, Instant, SystemTime};

use inboxed_core::retention::{Purger, PurgerConfig, Retention, RetentionError, RetentionStore};
use inboxed_core::{ConsumerName, Error, Outcome, ProcessorConfig, StoreError};

use super::{ledger, ledger_state, processor};
use crate::backend::Backend;
use crate::handler::credit;

const DAY: Duration = Duration::from_secs(86_400);

/// 30 days kept, redeliveries up to 7 days late: a valid setting.
fn month() -> Retention {
    Retention::new(30 * DAY, 7 * DAY)
}

/// 234 keys aged 40 days and 100 fresh ones of `ledger`, and 50 aged keys of another
/// consumer: a pass with batches of 20 deletes exactly the 234 (12 batches, the last one
/// short), leaves the fresh keys deduplicating and the other consumer's keys alone. A purged
/// key redelivered is processed again: that is what the window means, and why it must outlast
/// redeliveries.
pub async fn purge_deletes_only_expired_keys_in_bounded_batches<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _) = processor(&db, ProcessorConfig::default());
    let other = ConsumerName::new("audit").unwrap();
    let q = inboxed_core::Processor::new(
        db.store.clone(),
        other,
        crate::handler::Ledger::<B>::default(),
    );
    for i in 0..234 {
        p.process(&credit(&format!("old-{i}"), 1), None)
            .await
            .unwrap();
    }
    for i in 0..100 {
        p.process(&credit(&format!("new-{i}"), 1), None)
            .await
            .unwrap();
    }
    for i in 0..50 {
        q.process(&credit(&format!("old-a{i}"), 1), None)
            .await
            .unwrap();
    }
    B::age_processed(&db.store, "old-", 40).await;
    let purger = Purger::new(
        db.store.clone(),
        PurgerConfig::default()
            .batch_size(20)
            .pause(Duration::from_millis(1)),
    )
    .consumer(ledger(), month())
    .unwrap();
    let mut batches = 0;
    let report = purger
        .purge_once(SystemTime::now(), |_, _| batches += 1)
        .await
        .unwrap();
    assert_eq!(report.total(), 234);
    assert_eq!(batches, 12, "11 full batches of 20 and one short one");
    let keys = "SELECT count(*) FROM inboxed_processed_messages";
    assert_eq!(
        db.scalar(keys).await,
        150,
        "100 fresh keys and the other consumer's 50"
    );
    let again = purger
        .purge_once(SystemTime::now(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(again.total(), 0, "nothing left to purge");

    let before = ledger_state(&db).await;
    let fresh = p.process(&credit("new-7", 1), None).await.unwrap();
    assert_eq!(fresh, Outcome::Duplicate, "a kept key still deduplicates");
    let purged = p.process(&credit("old-7", 1), None).await.unwrap();
    assert_eq!(purged, Outcome::Processed, "a purged key is forgotten");
    assert_eq!(ledger_state(&db).await, (before.0 + 1, before.1 + 1));
    db.finish().await;
}

/// The purge's bounds are really applied: a batch blocked by a lock on one of its keys
/// (PostgreSQL: another transaction holds the row; SQLite: another connection holds the write
/// lock) fails within its timeout with a typed timeout error and deletes nothing; once the lock
/// is gone the same pass deletes everything. On PostgreSQL both the statement timeout (with a
/// long lock timeout) and the lock timeout are checked.
pub async fn purge_timeouts_are_applied<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _) = processor(&db, ProcessorConfig::default());
    for i in 0..20 {
        p.process(&credit(&format!("old-{i}"), 1), None)
            .await
            .unwrap();
    }
    B::age_processed(&db.store, "old-", 40).await;
    let bounds = if B::SERIAL_WRITERS {
        vec![(Duration::from_secs(10), Duration::from_millis(300))]
    } else {
        vec![
            (Duration::from_millis(300), Duration::from_secs(10)),
            (Duration::from_secs(10), Duration::from_millis(300)),
        ]
    };
    let keys = "SELECT count(*) FROM inboxed_processed_messages";
    for (statement_timeout, lock_timeout) in bounds {
        let purger = Purger::new(
            db.store.clone(),
            PurgerConfig::default()
                .statement_timeout(statement_timeout)
                .lock_timeout(lock_timeout),
        )
        .consumer(ledger(), month())
        .unwrap();
        let blocker = B::block_processed_key(&db.store, "old-3").await;
        let started = Instant::now();
        let err = purger
            .purge_once(SystemTime::now(), |_, _| {})
            .await
            .unwrap_err();
        let waited = started.elapsed();
        assert!(
            matches!(
                err,
                Error::Store(StoreError::Timeout(_) | StoreError::Busy(_))
            ),
            "a timeout, not {err:?}"
        );
        assert!(waited < Duration::from_secs(5), "gave up after {waited:?}");
        assert_eq!(
            db.scalar(keys).await,
            20,
            "a timed-out batch deletes nothing"
        );
        drop(blocker);
    }
    let purger = Purger::new(db.store.clone(), PurgerConfig::default())
        .consumer(ledger(), month())
        .unwrap();
    let report = purger
        .purge_once(SystemTime::now(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(report.total(), 20);
    assert_eq!(db.scalar(keys).await, 0);
    db.finish().await;
}

/// A window inside the redelivery horizon plus margin is refused before anything is deleted,
/// with an error that names the risk; overriding it knowingly is possible.
pub async fn short_retention_window_is_refused<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _) = processor(&db, ProcessorConfig::default());
    p.process(&credit("old-1", 1), None).await.unwrap();
    B::age_processed(&db.store, "old-", 3).await;
    let short = Retention::new(2 * DAY, 7 * DAY);
    let refused = Purger::new(db.store.clone(), PurgerConfig::default()).consumer(ledger(), short);
    let Err(err) = refused else {
        panic!("a window inside the horizon was accepted")
    };
    assert!(matches!(err, RetentionError::ShorterThanHorizon { .. }));
    assert!(err.to_string().contains("processed a second time"), "{err}");
    let keys = "SELECT count(*) FROM inboxed_processed_messages";
    assert_eq!(db.scalar(keys).await, 1);
    let purger = Purger::new(db.store.clone(), PurgerConfig::default())
        .consumer(ledger(), short.allow_short_window(true))
        .unwrap();
    purger
        .purge_once(SystemTime::now(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(
        db.scalar(keys).await,
        0,
        "overridden knowingly, the key goes"
    );
    db.finish().await;
}

/// The stats call: the oldest key's age from the index, the last minute's keys, the table's
/// bytes, and, once the table is analyzed, a row estimate from the catalog (PostgreSQL: the
/// consumer's exact share for a small analyzed table; SQLite: the average per consumer).
pub async fn processed_stats_report_age_growth_and_size<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _) = processor(&db, ProcessorConfig::default());
    for i in 0..40 {
        p.process(&credit(&format!("old-{i}"), 1), None)
            .await
            .unwrap();
    }
    for i in 0..60 {
        p.process(&credit(&format!("new-{i}"), 1), None)
            .await
            .unwrap();
    }
    B::age_processed(&db.store, "old-", 10).await;
    let stats = db.store.processed_stats(&ledger()).await.unwrap();
    assert_eq!(stats.last_minute, 60);
    assert_eq!(stats.growth_per_hour(), 3_600);
    let age = SystemTime::now()
        .duration_since(stats.oldest.expect("an oldest key"))
        .unwrap();
    let hour = Duration::from_secs(3_600);
    assert!(age > 10 * DAY - hour && age < 10 * DAY + hour, "{age:?}");
    assert!(stats.table_bytes > 0);
    B::analyze(&db.store).await;
    let stats = db.store.processed_stats(&ledger()).await.unwrap();
    let estimate = stats.estimated_rows.expect("an estimate once analyzed");
    if B::SERIAL_WRITERS {
        assert!(estimate > 0);
    } else {
        assert_eq!(estimate, 100);
    }
    let empty = db
        .store
        .processed_stats(&ConsumerName::new("nobody").unwrap())
        .await
        .unwrap();
    assert_eq!((empty.oldest, empty.last_minute), (None, 0));
    db.finish().await;
}

/// Dead letters, the re-drive audit and done rows' payloads have windows of their own, apart
/// from the dedup window; payloads can be redacted when a message is dead-lettered, and such a
/// dead letter refuses a retry with a typed error instead of processing an empty payload.
pub async fn other_tables_have_their_own_windows<B: Backend>(_test: &str) {
    use super::inbox::{drain, enqueue_all, inbox, with_status, worker};
    use crate::handler::{Ledger, Script};
    use inboxed_core::inbox::{Selector, WorkerConfig};

    let db = B::create().await;
    let poison = |id: &str| {
        Script {
            fail: Some("permanent".into()),
            ..Script::default()
        }
        .message(id)
    };
    let (kept, _) = processor(&db, ProcessorConfig::default());
    let (redacting, _) = processor(
        &db,
        ProcessorConfig::default().redact_dead_letter_payloads(true),
    );
    kept.process(&poison("dl-kept"), None).await.unwrap();
    redacting
        .process(&poison("dl-redacted"), None)
        .await
        .unwrap();
    let empty = "SELECT count(*) FROM inboxed_dead_letters WHERE length(payload) = 0";
    assert_eq!(
        db.scalar(empty).await,
        1,
        "only the redacting processor's dead letter is empty"
    );
    let id = inboxed_core::MessageId::new("dl-redacted").unwrap();
    let err = redacting.retry_dead_letter(&id).await.unwrap_err();
    assert!(matches!(err, Error::PayloadRedacted { .. }), "{err:?}");

    let stored: Vec<_> = (0..3).map(|i| credit(&format!("in-{i}"), 1)).collect();
    enqueue_all(&db, stored.clone(), 1).await;
    let handler = Ledger::<B>::default();
    let w = worker(&db, WorkerConfig::default(), &handler);
    drain(&db, std::slice::from_ref(&w)).await;
    let ids = db
        .scalar("SELECT min(id) FROM inboxed_inbox_messages")
        .await;
    let inbox = inbox(&db);
    inbox
        .replay(&Selector::ids(vec![ids]), true, "test", "re-drive one")
        .await
        .unwrap();
    drain(&db, std::slice::from_ref(&w)).await;
    assert_eq!(with_status(&db, "done").await, 3);
    let conflicting = credit("in-0", 99);
    let outcome = inbox
        .clone()
        .redact_dead_letter_payloads(true)
        .store(&conflicting)
        .await;
    assert!(
        matches!(outcome, Ok(inboxed_core::inbox::Enqueued::Conflict { .. })),
        "{outcome:?}"
    );
    assert_eq!(
        db.scalar(empty).await,
        2,
        "the receipt's conflict letter is redacted too"
    );

    let purger = Purger::new(db.store.clone(), PurgerConfig::default())
        .consumer(ledger(), Retention::new(60 * DAY, 7 * DAY))
        .unwrap()
        .dead_letters(30 * DAY)
        .redrive_audit(30 * DAY)
        .done_payloads(30 * DAY);
    let now = purger
        .purge_once(SystemTime::now(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(
        (now.dead_letters, now.audit_records, now.redacted_payloads),
        (0, 0, 0),
        "nothing is older than 30 days yet"
    );
    let later = SystemTime::now() + 40 * DAY;
    let report = purger.purge_once(later, |_, _| {}).await.unwrap();
    assert_eq!(
        (
            report.dead_letters,
            report.audit_records,
            report.redacted_payloads
        ),
        (3, 1, 3)
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
        0
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_redrive_audit")
            .await,
        0
    );
    let emptied = "SELECT count(*) FROM inboxed_inbox_messages WHERE length(payload) = 0";
    assert_eq!(
        db.scalar(emptied).await,
        3,
        "the rows stay, their payloads go"
    );
    let redrive = inbox
        .replay(
            &Selector::ids(vec![ids]),
            true,
            "test",
            "re-drive a redacted row",
        )
        .await
        .unwrap();
    assert!(
        redrive.ids.is_empty(),
        "a redacted row is not re-driven: {redrive:?}"
    );
    drain(&db, std::slice::from_ref(&w)).await;
    assert_eq!(with_status(&db, "done").await, 3);
    let keys = "SELECT count(*) FROM inboxed_processed_messages";
    assert_eq!(
        db.scalar(keys).await,
        0,
        "no processed keys here: the workers use the inbox"
    );
    let again = inbox.store(&stored[1]).await.unwrap();
    assert_eq!(
        again,
        inboxed_core::inbox::Enqueued::Duplicate,
        "a done row still deduplicates"
    );
    let (rows, sum) = ledger_state(&db).await;
    assert_eq!((rows, sum), (4, 4), "three credits and the one re-drive");
    db.finish().await;
}
