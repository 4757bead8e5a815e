//! A row whose publish kills its relay, under each way the engine can hold a batch: the relay
//! dies every time the row is in its batch (here, its batch's future is dropped mid-publish,
//! which ends its transaction or leaves its lease to run out, as a SIGKILL does), and the
//! reaper halves the batch around it until it goes alone and is charged. It must end dead with
//! the reason, and every other row sent, none of them charged for its deaths.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use inboxed_core::inbox::ClaimMode;
use inboxed_core::outbox::store::OutboxStore;
use inboxed_core::outbox::{Confirmation, OutboxRelay, OutboxRelayConfig, OutboxRow, Publisher};

use super::outbox::{label, write_all};
use crate::backend::Backend;

/// Confirms every row, unless the batch holds the poison: then it never returns.
#[derive(Debug)]
struct Poisoned {
    poison: &'static str,
    sent: Mutex<BTreeSet<String>>,
}

impl Publisher for Poisoned {
    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        if rows.iter().any(|r| label(r) == self.poison) {
            std::future::pending::<()>().await;
        }
        let mut sent = self.sent.lock().unwrap();
        sent.extend(rows.iter().map(label));
        rows.iter().map(|_| Confirmation::Confirmed).collect()
    }
}

/// 16 rows, the sixth poison, batches of 16, three attempts: in both claim modes (lock-held
/// only where the engine has it).
pub async fn a_row_that_kills_its_relay_is_cornered_alone<B: Backend>(_test: &str) {
    let modes = [ClaimMode::Lease, ClaimMode::LockHeld];
    for mode in modes {
        let db = B::create().await;
        if mode == ClaimMode::LockHeld && !db.store.locks_outbox() {
            db.finish().await;
            continue;
        }
        let rows: Vec<(&str, u32)> = (1..=16).map(|n| ("", n)).collect();
        write_all(&db, &rows).await;
        let lease = Duration::from_millis(150);
        let config = OutboxRelayConfig::default()
            .claim_mode(mode)
            .batch_size(16)
            .max_attempts(3)
            .lease(lease)
            .notify(false);
        let publisher = Poisoned {
            poison: "-6",
            sent: Mutex::new(BTreeSet::new()),
        };
        let relay = OutboxRelay::new(db.store.clone(), publisher, config);
        let mut deaths = 0;
        for _ in 0..60 {
            let settled = db
                .scalar(
                    "SELECT count(*) FROM inboxed_outbox_messages \
                     WHERE status IN ('sent', 'dead')",
                )
                .await;
            if settled == 16 {
                break;
            }
            match tokio::time::timeout(Duration::from_millis(300), relay.run_once()).await {
                Ok(report) => {
                    report.unwrap();
                }
                Err(_) => {
                    // The relay "died" publishing: its lease runs out, or its transaction
                    // ended with its connection, and the next pass judges the batch.
                    deaths += 1;
                    tokio::time::sleep(lease + Duration::from_millis(50)).await;
                    relay.reap().await.unwrap();
                }
            }
        }
        let sent = relay.publisher().sent.lock().unwrap().len();
        assert_eq!(sent, 15, "{mode:?}: every other row published");
        assert_eq!(
            db.scalar(
                "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sent' \
                 AND attempts = 1"
            )
            .await,
            15,
            "{mode:?}: sent, charged only for the publish that confirmed them"
        );
        assert_eq!(
            db.scalar(
                "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'dead' \
                 AND attempts = 3 AND last_error LIKE '%stopped%' \
                 AND headers->>'n' = '-6'"
            )
            .await,
            1,
            "{mode:?}: the poison dead after three deaths alone"
        );
        // 16 → 8 → 4 → 2 → 1, then charged alone three times.
        assert_eq!(
            deaths, 7,
            "{mode:?}: halved down to the row, then its attempts"
        );
        if mode == ClaimMode::LockHeld {
            assert_eq!(
                db.scalar("SELECT count(*) FROM inboxed_outbox_unmarked")
                    .await,
                0,
                "every batch's record went with its mark or its judging"
            );
        }
        db.finish().await;
    }
}

/// A database of an engine with lock-held claims, with eight unkeyed rows written; `None` on
/// another engine (the case does not apply).
async fn eight_rows_to_lock<B: Backend>() -> Option<crate::backend::TestDb<B>> {
    let db = B::create().await;
    if !db.store.locks_outbox() {
        db.finish().await;
        return None;
    }
    let rows: Vec<(&str, u32)> = (1..=8).map(|n| ("", n)).collect();
    write_all(&db, &rows).await;
    Some(db)
}

/// A lock-held relay that waits for no notification.
fn lock_held() -> OutboxRelayConfig {
    OutboxRelayConfig::default()
        .claim_mode(ClaimMode::LockHeld)
        .notify(false)
}

/// Confirms every row, after `release` is notified the first time.
#[derive(Debug, Default)]
struct Held {
    started: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

impl Publisher for Held {
    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        self.started.notify_one();
        self.release.notified().await;
        rows.iter().map(|_| Confirmation::Confirmed).collect()
    }
}

/// A reap while a lock-held batch is publishing judges nothing: the batch's transaction holds
/// its record's key. Then the batch is marked, its record goes, and every row is sent once.
pub async fn a_reap_beside_a_live_lock_held_batch_judges_nothing<B: Backend>(_test: &str) {
    let Some(db) = eight_rows_to_lock::<B>().await else {
        return;
    };
    let relay = OutboxRelay::new(db.store.clone(), Held::default(), lock_held());
    let running = {
        let relay = relay.clone();
        tokio::spawn(async move { relay.run_once().await })
    };
    relay.publisher().started.notified().await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_unmarked")
            .await,
        1,
        "the batch recorded itself before its publish"
    );
    assert_eq!(relay.reap().await.unwrap(), 0, "a live batch is not judged");
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_unmarked")
            .await,
        1,
        "its record stays"
    );
    relay.publisher().release.notify_one();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.claimed, report.sent), (8, 8));
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sent' \
             AND attempts = 1 AND group_limit IS NULL"
        )
        .await,
        8
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_unmarked")
            .await,
        0,
        "the mark deleted the record"
    );
    db.finish().await;
}

/// Confirms every row at once.
#[derive(Debug)]
struct AtOnce;

impl Publisher for AtOnce {
    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        rows.iter().map(|_| Confirmation::Confirmed).collect()
    }
}

/// A lock-held batch cut to a crashed batch's limit holds only the rows it publishes: while
/// it publishes two rows of eight (every row limited to batches of two), another relay takes
/// the next two, not nothing.
pub async fn rows_past_a_batch_limit_are_left_to_other_relays<B: Backend>(_test: &str) {
    let Some(db) = eight_rows_to_lock::<B>().await else {
        return;
    };
    assert_eq!(
        db.scalar(
            "WITH limited AS (UPDATE inboxed_outbox_messages SET group_limit = 2 RETURNING 1) \
             SELECT count(*) FROM limited"
        )
        .await,
        8
    );
    let held = OutboxRelay::new(db.store.clone(), Held::default(), lock_held());
    let running = {
        let relay = held.clone();
        tokio::spawn(async move { relay.run_once().await })
    };
    held.publisher().started.notified().await;
    let other = OutboxRelay::new(db.store.clone(), AtOnce, lock_held());
    let report = other.run_once().await.unwrap();
    assert_eq!(
        (report.claimed, report.sent),
        (2, 2),
        "the other relay takes the next two rows"
    );
    held.publisher().release.notify_one();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.claimed, report.sent), (2, 2));
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sent' \
             AND headers->>'n' IN ('-1', '-2', '-3', '-4')"
        )
        .await,
        4
    );
    db.finish().await;
}
