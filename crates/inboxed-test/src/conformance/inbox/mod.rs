//! The store-then-process inbox cases: receipt, claims and leases, workers, ordering, replay,
//! retention, shutdown and a killed worker process. All assert on business state.

mod batches;
mod claims;
mod observe;
mod operate;
mod ordering;
mod processing;
mod receipt;
mod survival;

pub use batches::batch_handler_is_all_or_nothing;
pub use claims::{
    a_worker_ignoring_the_group_limit_is_charged, claim_batch_skips_rows_locked_by_another_worker,
    complete_after_reclaim_is_fenced, concurrent_claims_never_share_a_row,
    dead_claims_are_redone_in_halves, reaper_returns_expired_claims,
};
pub use observe::observation_counts_backlog_and_dead_letters;
pub use operate::{
    dead_letters_are_retried_into_the_inbox_and_discarded, rows_and_the_audit_trail_are_listed,
};
pub use ordering::{
    ordered_mode_can_skip_dead_events, ordered_mode_keeps_order_and_parks_dead_aggregates,
};
pub use processing::{
    a_row_asked_to_retry_later_keeps_its_attempts, batch_whose_commit_fails_isolates_the_culprit,
    lock_held_mode_processes_exactly_once, poison_rows_go_dead_after_max_attempts,
    stored_rows_wake_idle_workers, workers_process_each_row_exactly_once,
};
pub use receipt::{
    batch_receipt_stores_each_key_once, purge_removes_only_old_done_rows,
    receipt_stores_once_and_reports_conflicts, replay_and_audited_redrive,
    stored_rows_keep_their_headers,
};
pub use survival::{
    dead_worker_rows_return_at_the_next_pass, graceful_shutdown_loses_nothing,
    killed_worker_process_loses_nothing, process_killing_row_spares_its_batch_mates,
    sigterm_to_a_worker_process_loses_nothing,
};

use std::time::Duration;

use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::{Envelope, Ladder};

use super::ledger;
use crate::backend::{Backend, TestDb};
use crate::handler::Ledger;

pub(crate) fn inbox<B: Backend>(db: &TestDb<B>) -> Inbox<B::Store> {
    Inbox::new(db.store.clone(), ledger())
}

/// A worker for consumer `ledger` with no backoff, so retries are immediate.
pub(crate) fn worker<B: Backend>(
    db: &TestDb<B>,
    config: WorkerConfig,
    handler: &Ledger<B>,
) -> Worker<B::Store, Ledger<B>> {
    let config = config.ladder(Ladder::constant(Duration::ZERO));
    Worker::new(db.store.clone(), ledger(), handler.clone(), config)
}

/// `n` messages `<prefix>-<i>` crediting random amounts, a tenth of them received twice (a
/// producer retry), each handler call failing transiently with probability `flaky`; `hang_at`
/// scripts one message to hang in a child process. Returns the deliveries and the expected
/// ledger sum. Seeded, so a failure can be replayed.
pub(crate) fn stream(
    prefix: &str,
    n: usize,
    seed: u64,
    flaky: f64,
    hang_at: Option<usize>,
) -> (Vec<Envelope>, i64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let (mut messages, mut expected) = (Vec::new(), 0);
    for i in 0..n {
        let amount = rng.i64(1..100);
        expected += amount;
        let script = crate::handler::Script {
            amount,
            flaky,
            hang: hang_at == Some(i),
            ..Default::default()
        };
        let msg = script.message(&format!("{prefix}-{i}"));
        if rng.f64() < 0.1 {
            messages.push(msg.clone());
        }
        messages.push(msg);
    }
    (messages, expected)
}

/// Stores every envelope, `tasks` at a time.
pub(crate) async fn enqueue_all<B: Backend>(db: &TestDb<B>, messages: Vec<Envelope>, tasks: usize) {
    let chunk = messages.len().div_ceil(tasks.max(1)).max(1);
    let mut handles = Vec::new();
    for part in messages.chunks(chunk) {
        let (inbox, part) = (inbox(db), part.to_vec());
        handles.push(tokio::spawn(async move {
            for m in &part {
                inbox.store(m).await.expect("store");
            }
        }));
    }
    for h in handles {
        h.await.expect("enqueue task");
    }
}

/// Runs `run_once` on every worker concurrently until a round claims nothing (every row is
/// done, dead, or parked behind a dead row of its aggregate).
pub(crate) async fn drain<B, H>(_db: &TestDb<B>, workers: &[Worker<B::Store, H>])
where
    B: Backend,
    H: inboxed_core::Handler<<B::Store as inboxed_core::Store>::Db>,
{
    for _ in 0..10_000 {
        let mut handles = Vec::new();
        for w in workers {
            let w = w.clone();
            handles.push(tokio::spawn(async move { w.run_once().await }));
        }
        let mut claimed = 0;
        for h in handles {
            claimed += h.await.expect("worker task").expect("batch").claimed;
        }
        if claimed == 0 {
            return;
        }
    }
    panic!("workers still claiming rows after 10,000 rounds");
}

pub(crate) async fn unfinished<B: Backend>(db: &TestDb<B>) -> i64 {
    db.scalar(
        "SELECT count(*) FROM inboxed_inbox_messages WHERE status IN ('pending', 'processing')",
    )
    .await
}

pub(crate) async fn with_status<B: Backend>(db: &TestDb<B>, status: &'static str) -> i64 {
    match status {
        "done" => {
            db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'done'")
                .await
        }
        "dead" => {
            db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'dead'")
                .await
        }
        "pending" => {
            db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'pending'")
                .await
        }
        _ => {
            db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'processing'")
                .await
        }
    }
}
