//! Claims, leases and their fencing, checked at the store level with an injected clock.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use inboxed_core::Store;
use inboxed_core::driver::Transaction as _;
use inboxed_core::inbox::store::{
    ClaimBatchParams, ClaimToken, CompleteParams, Completed, InboxRow, InboxStore,
};
use inboxed_core::inbox::{Reaper, ReaperConfig, WorkerConfig};
use inboxed_core::store::BeginParams;

use super::{inbox, with_status, worker};
use crate::backend::{Backend, TestDb};
use crate::conformance::{ledger, ledger_state};
use crate::handler::{Ledger, credit};

const LEASE: Duration = Duration::from_secs(30);

/// The injected clock: a second ahead, because the injected time travels in whole milliseconds
/// while PostgreSQL stamps `available_at` in microseconds; a row received in the same
/// millisecond would otherwise look not yet available.
fn clock() -> SystemTime {
    SystemTime::now() + Duration::from_secs(1)
}

async fn claim<B: Backend>(
    db: &TestDb<B>,
    token: &ClaimToken,
    limit: u32,
    now: SystemTime,
) -> Vec<InboxRow> {
    claim_as(db, "test", token, limit, now).await
}

/// A claim by `worker` (up to its first '/', the process the reaper judges it with).
async fn claim_as<B: Backend>(
    db: &TestDb<B>,
    worker: &str,
    token: &ClaimToken,
    limit: u32,
    now: SystemTime,
) -> Vec<InboxRow> {
    let consumer = ledger();
    let params = ClaimBatchParams {
        consumer: &consumer,
        worker,
        token,
        limit,
        lease: LEASE,
        now: Some(now),
        ordered: false,
        park: true,
    };
    db.store.claim_batch(&params).await.unwrap()
}

/// Applies a row's effect and completes it in one transaction, as a worker does; commits only
/// when the completion is ours.
async fn apply<B: Backend>(db: &TestDb<B>, row: &InboxRow, token: &ClaimToken) -> Completed {
    let mut tx = db.store.begin(&BeginParams::default()).await.unwrap();
    B::ledger_insert(&mut tx, row.envelope.id().as_str(), "a", 1)
        .await
        .unwrap();
    let done = db
        .store
        .complete(&mut tx, &CompleteParams { id: row.id, token })
        .await
        .unwrap();
    if done == Completed::Done {
        tx.commit().await.unwrap();
    }
    done
}

/// A worker whose lease was reaped and whose row was claimed again cannot complete it: its
/// transaction rolls back with its business writes, and the new holder applies the effect once.
pub async fn complete_after_reclaim_is_fenced<B: Backend>(_test: &str) {
    let db = B::create().await;
    inbox(&db).store(&credit("f-1", 1)).await.unwrap();
    let t0 = clock();
    let (slow, fast) = (ClaimToken::random(), ClaimToken::random());
    let rows = claim(&db, &slow, 10, t0).await;
    assert_eq!(rows.len(), 1);
    let reaper = Reaper::new(db.store.clone(), ReaperConfig::default());
    assert_eq!(
        reaper
            .reap_once(Some(t0 + LEASE + Duration::from_secs(1)))
            .await
            .unwrap(),
        1
    );
    let again = claim(&db, &fast, 10, t0 + LEASE + Duration::from_secs(2)).await;
    assert_eq!((again.len(), again[0].attempts), (1, 2));
    assert_eq!(apply(&db, &rows[0], &slow).await, Completed::LostClaim);
    assert_eq!(
        ledger_state(&db).await,
        (0, 0),
        "the slow worker's write rolled back"
    );
    assert_eq!(apply(&db, &again[0], &fast).await, Completed::Done);
    assert_eq!(ledger_state(&db).await, (1, 1));
    assert_eq!(with_status(&db, "done").await, 1);
    db.finish().await;
}

/// The reaper leaves live leases alone, returns expired ones to pending (their attempt was
/// counted at claim time), and sends a row to dead once its attempts are used up. The clock is
/// injected: no test sleeps.
pub async fn reaper_returns_expired_claims<B: Backend>(_test: &str) {
    let db = B::create().await;
    inbox(&db).store(&credit("x-1", 1)).await.unwrap();
    let reaper = Reaper::new(db.store.clone(), ReaperConfig::default().max_attempts(2));
    let t0 = clock();
    assert_eq!(claim(&db, &ClaimToken::random(), 1, t0).await.len(), 1);
    assert_eq!(
        reaper
            .reap_once(Some(t0 + Duration::from_secs(10)))
            .await
            .unwrap(),
        0,
        "lease still live"
    );
    let t1 = t0 + LEASE + Duration::from_secs(1);
    assert_eq!(reaper.reap_once(Some(t1)).await.unwrap(), 1);
    assert_eq!(with_status(&db, "pending").await, 1);
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE attempts = 1 AND last_error LIKE 'lease expired%'").await, 1);
    assert_eq!(claim(&db, &ClaimToken::random(), 1, t1).await.len(), 1);
    assert_eq!(
        reaper
            .reap_once(Some(t1 + LEASE + Duration::from_secs(1)))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        with_status(&db, "dead").await,
        1,
        "two claims that never finished"
    );
    db.finish().await;
}

/// Two claims at once never share a row. On PostgreSQL, a row locked by another transaction is
/// skipped rather than waited for (`FOR UPDATE SKIP LOCKED`). SQLite has a single writer, so
/// its claims cannot interleave and there is no row lock to skip: there the case checks that
/// concurrent claims are disjoint and complete.
pub async fn claim_batch_skips_rows_locked_by_another_worker<B: Backend>(_test: &str) {
    let db = B::create().await;
    let inbox = inbox(&db);
    for i in 0..10 {
        inbox.store(&credit(&format!("k-{i}"), 1)).await.unwrap();
    }
    let now = clock();
    if !B::SERIAL_WRITERS {
        let held = B::lock_inbox_row(&db.store, 1).await;
        let rows = tokio::time::timeout(
            Duration::from_secs(5),
            claim(&db, &ClaimToken::random(), 3, now),
        )
        .await
        .expect("the claim must not wait on the locked row");
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        assert_eq!(ids.len(), 3);
        assert!(
            !ids.contains(&1),
            "row 1 is locked by another transaction: {ids:?}"
        );
        held.rollback().await.unwrap(); // dropping would only queue the rollback
    }
    let (a, b) = (ClaimToken::random(), ClaimToken::random());
    let (ra, rb) = tokio::join!(claim(&db, &a, 5, now), claim(&db, &b, 5, now));
    let ids: HashSet<i64> = ra.iter().chain(rb.iter()).map(|r| r.id).collect();
    assert_eq!(ids.len(), ra.len() + rb.len(), "no row claimed twice");
    assert_eq!(
        with_status(&db, "processing").await,
        10,
        "every row claimed once"
    );
    db.finish().await;
}

/// Under load, concurrent claims never hand out a row twice: 4 claim loops empty 6,000
/// pending rows 20 at a time (300 claims racing), and every row is claimed exactly once.
pub async fn concurrent_claims_never_share_a_row<B: Backend>(_test: &str) {
    const ROWS: usize = 6_000;
    let db = B::create().await;
    let messages = (0..ROWS).map(|i| credit(&format!("u-{i}"), 1)).collect();
    super::enqueue_all(&db, messages, 8).await;
    let now = clock();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let store = db.store.clone();
        tasks.push(tokio::spawn(async move {
            let consumer = ledger();
            let mut ids = Vec::new();
            loop {
                let token = ClaimToken::random();
                let params = ClaimBatchParams {
                    consumer: &consumer,
                    worker: "u",
                    token: &token,
                    limit: 20,
                    lease: LEASE,
                    now: Some(now),
                    ordered: false,
                    park: true,
                };
                let rows = store.claim_batch(&params).await.unwrap();
                if rows.is_empty() {
                    return ids;
                }
                ids.extend(rows.iter().map(|r| r.id));
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(
        (all.len(), distinct.len()),
        (ROWS, ROWS),
        "a row was claimed twice"
    );
    assert_eq!(with_status(&db, "processing").await, ROWS as i64);
    db.finish().await;
}

/// The reaper blames the rows of a dead process by what it still held (contract v3). A row
/// held alone keeps its attempt and runs alone next; rows held together get their attempt back
/// and run in groups of half as many. Forty rows of a dead process (two claims of 20: the
/// process is judged whole) are redone as groups of 20, not as forty claims of one; twenty of
/// them dying again in a group of 20 are redone in groups of 10.
pub async fn dead_claims_are_redone_in_halves<B: Backend>(_test: &str) {
    let db = B::create().await;
    let inbox = inbox(&db);
    for i in 0..40 {
        inbox.store(&credit(&format!("h-{i:02}"), 1)).await.unwrap();
    }
    let t0 = clock();
    for _ in 0..2 {
        let rows = claim_as(&db, "p1-a/w1", &ClaimToken::random(), 20, t0).await;
        assert_eq!(rows.len(), 20);
    }
    inbox.store(&credit("h-40", 1)).await.unwrap();
    let lone = claim_as(&db, "p2-b/w1", &ClaimToken::random(), 1, clock()).await;
    assert_eq!(lone.len(), 1);
    let reaper = Reaper::new(db.store.clone(), ReaperConfig::default());
    let t1 = clock() + LEASE + Duration::from_secs(1);
    assert_eq!(reaper.reap_once(Some(t1)).await.unwrap(), 41);
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_inbox_messages WHERE attempts = 0 AND group_limit = 20"
        )
        .await,
        40,
        "held together: no attempt charged, the next group half as large"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE message_id = 'h-40' AND attempts = 1 AND group_limit = 1")
            .await,
        1,
        "held alone: charged, and alone next"
    );
    // Twenty of the forty die again, together, in another process.
    let again = claim_as(&db, "p3-c/w1", &ClaimToken::random(), 20, t1).await;
    assert_eq!(again.len(), 20);
    let t2 = t1 + LEASE + Duration::from_secs(1);
    assert_eq!(reaper.reap_once(Some(t2)).await.unwrap(), 20);
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_inbox_messages WHERE attempts = 0 AND group_limit = 10"
        )
        .await,
        20
    );
    // The worker's claims: the lone row alone, the twice-dead twenty in tens, the rest whole.
    let handler = Ledger::<B>::default();
    let w = worker(&db, WorkerConfig::default().batch_size(50), &handler);
    let mut claims = Vec::new();
    loop {
        let report = w.run_once().await.unwrap();
        if report.claimed == 0 {
            break;
        }
        claims.push((report.claimed, report.done));
    }
    assert_eq!(claims, [(1, 1), (10, 10), (10, 10), (20, 20)]);
    assert_eq!(ledger_state(&db).await, (41, 41));
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_inbox_messages WHERE attempts = 1 AND status = 'done'"
        )
        .await,
        40,
        "each of the forty charged once, by the claim that processed it"
    );
    db.finish().await;
}

/// A worker that ignores the group limit (one of another language that runs a returned row
/// with its batch-mates, or a Rust worker whose wait for its turn alone ran out) cannot corner
/// a poison row by halving, so the reaper charges its rows: without that, a row that kills
/// such a worker would never go dead.
pub async fn a_worker_ignoring_the_group_limit_is_charged<B: Backend>(_test: &str) {
    let db = B::create().await;
    let inbox = inbox(&db);
    for i in 0..4 {
        inbox.store(&credit(&format!("g-{i}"), 1)).await.unwrap();
    }
    let reaper = Reaper::new(db.store.clone(), ReaperConfig::default().max_attempts(2));
    let mut now = clock();
    for (death, worker) in ["old-1", "old-2", "old-3"].into_iter().enumerate() {
        let rows = claim_as(&db, worker, &ClaimToken::random(), 4, now).await;
        assert_eq!(rows.len(), 4, "all four together, whatever their limit");
        now += LEASE + Duration::from_secs(1);
        assert_eq!(reaper.reap_once(Some(now)).await.unwrap(), 4);
        let expected = match death {
            0 => {
                "SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'pending' AND attempts = 0 AND group_limit = 2"
            }
            1 => {
                "SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'pending' AND attempts = 1 AND group_limit = 2"
            }
            _ => {
                "SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'dead' AND attempts = 2"
            }
        };
        assert_eq!(db.scalar(expected).await, 4, "after death {}", death + 1);
    }
    db.finish().await;
}
