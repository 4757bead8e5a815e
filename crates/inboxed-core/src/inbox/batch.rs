//! One claimed batch (lease mode): for a handler with a `handle_batch` of its own, optimistically
//! one transaction for the whole batch and one fenced completion; otherwise, and after a failure
//! of that, a transaction per row with its own fenced completion; failures recorded in their
//! own transactions.

use std::sync::atomic::Ordering;

use tracing::{Instrument, warn};

use super::store::{ClaimToken, InboxRow, InboxStore};
use super::worker::{BatchReport, Worker};
use crate::driver::{Driver, Transaction as _};
use crate::error::{Error, HandlerError, StoreError, error_chain};
use crate::handler::{Handler, call_guarded, call_guarded_batch};
use crate::metrics as m;

/// Extends the batch's lease on schedule until dropped.
struct Heartbeat(tokio::task::JoinHandle<()>);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<S: InboxStore, H: Handler<S::Db>> Worker<S, H> {
    pub(super) async fn process_batch(
        &self,
        mut rows: Vec<InboxRow>,
        token: ClaimToken,
    ) -> Result<BatchReport, Error> {
        let inner = &*self.inner;
        // The claim's RETURNING order is not guaranteed; arrival order is the row id.
        rows.sort_by_key(|r| r.id);
        let mut report = BatchReport {
            claimed: rows.len() as u64,
            ..BatchReport::default()
        };
        let _heartbeat = {
            let (store, lease, every) = (
                inner.store.clone(),
                inner.config.lease,
                inner.config.heartbeat,
            );
            let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
            Heartbeat(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if let Err(e) = store.extend_leases(&token, &ids, lease).await {
                        warn!(error = %e, "could not extend the batch's lease");
                    }
                }
            }))
        };
        if rows.len() > 1 && H::BATCHES {
            match self.fast_path(&rows, &token).await {
                Ok(FastPath::Done) => {
                    report.done = report.claimed;
                    self.count(&report);
                    return Ok(report);
                }
                Ok(FastPath::Failed(cause)) => {
                    self.fell_back(cause, &cause.to_string(), &rows);
                    self.run_rows(rows, &token, &mut report).await?;
                    self.count(&report);
                    return Ok(report);
                }
                Err(e) => {
                    self.fell_back(FallBack::Transaction, &error_chain(&e), &rows);
                    self.run_rows(rows, &token, &mut report).await?;
                    self.count(&report);
                    return Ok(report);
                }
            }
        }
        self.run_groups(rows, &token, &mut report).await?;
        self.count(&report);
        Ok(report)
    }

    /// The rows of a `handle`-only handler, in groups that share a transaction and a commit.
    /// The group size adapts to contention, for the whole worker: one more row after each
    /// group (or single row) that commits, half as many after a group that hit a lock held by
    /// another transaction for longer than [`GROUP_LOCK_WAIT`] (or a deadlock, or a
    /// serialization failure). Alone, a worker's groups grow to the batch size and commit once
    /// a batch; with many workers crediting the same rows they shrink until they rarely meet.
    /// A group that lost to a lock conflict is regrouped at half its size; one that failed
    /// otherwise is redone one row per transaction (a failing row alone, the others regrouped).
    async fn run_groups(
        &self,
        rows: Vec<InboxRow>,
        token: &ClaimToken,
        report: &mut BatchReport,
    ) -> Result<(), Error> {
        let inner = &*self.inner;
        let most = inner.config.batch_size.max(1);
        let mut queue: std::collections::VecDeque<InboxRow> = rows.into();
        // At most this many rows in the next group: half of a group that just lost to a lock
        // conflict, whatever the worker's shared size says meanwhile, so that the rows of a
        // group that keeps meeting others reach a group of one (a transaction of their own,
        // under the configured lock timeout) in a few tries.
        let mut cap = usize::MAX;
        while !queue.is_empty() {
            let size = inner.group_size.load(Ordering::Relaxed).clamp(1, most) as usize;
            let mut group: Vec<InboxRow> = queue.drain(..size.min(cap).min(queue.len())).collect();
            if group.len() > 1 {
                match self.group_path(&group, token).await {
                    Ok(None) => {
                        report.done += group.len() as u64;
                        self.grow_groups(most);
                        cap = usize::MAX;
                        continue;
                    }
                    Ok(Some((cause @ FallBack::Handler(true), _))) => {
                        // A lock conflict is not the rows' fault: they go back to be grouped
                        // again, smaller. Redoing them one transaction each (as after other
                        // failures) cost four round trips and a commit a row, and under
                        // contention most rows of a drain were redone that way.
                        self.group_failed(cause, &cause.to_string(), &group);
                        cap = (group.len() / 2).max(1);
                        for row in group.into_iter().rev() {
                            queue.push_front(row);
                        }
                        continue;
                    }
                    Ok(Some((cause @ FallBack::Handler(false), Some(at)))) => {
                        // One row's own failure: it runs alone now, and the others go back to
                        // be grouped again. (The rows of a batch have no order between them
                        // that matters: ordered mode claims one row per aggregate at most.)
                        self.group_failed(cause, &cause.to_string(), &group);
                        let culprit = group.remove(at);
                        for row in group.into_iter().rev() {
                            queue.push_front(row);
                        }
                        self.run_rows(vec![culprit], token, report).await?;
                        continue;
                    }
                    Ok(Some((cause, _))) => self.group_failed(cause, &cause.to_string(), &group),
                    Err(e) => self.group_failed(FallBack::Transaction, &error_chain(&e), &group),
                }
            }
            let done = report.done;
            self.run_rows(group, token, report).await?;
            if report.done > done {
                self.grow_groups(most);
            }
        }
        Ok(())
    }

    fn grow_groups(&self, most: u32) {
        let _ = self
            .inner
            .group_size
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| {
                Some((k + 1).min(most))
            });
    }

    /// A group that did not commit: its size halves on a lock conflict; counted by cause and
    /// logged at DEBUG (under contention it is routine, and the metric shows the rate).
    fn group_failed(&self, cause: FallBack, detail: &str, rows: &[InboxRow]) {
        if matches!(cause, FallBack::Handler(true)) {
            let _ = self
                .inner
                .group_size
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| {
                    Some((k / 2).max(1))
                });
        }
        tracing::debug!(
            cause = cause.label(),
            error = detail,
            rows = rows.len(),
            group_size = self.inner.group_size.load(Ordering::Relaxed),
            "row group fell back to one transaction per row"
        );
        metrics::counter!(m::BATCH_FALLBACKS_TOTAL, "consumer" => self.inner.consumer.as_str().to_owned(), "cause" => cause.label())
            .increment(1);
    }

    /// One group of a `handle`-only handler's rows in one transaction: `handle` for each, one
    /// fenced completion, one commit; `Ok(None)` when it committed. Its lock waits are bounded
    /// by [`GROUP_LOCK_WAIT`] (or the configured lock timeout, if shorter): a group waiting on
    /// another's locks is the contention that shrinks the groups.
    async fn group_path(
        &self,
        rows: &[InboxRow],
        token: &ClaimToken,
    ) -> Result<Option<(FallBack, Option<usize>)>, StoreError> {
        let inner = &*self.inner;
        let mut begin = inner.config.begin;
        begin.lock_timeout = begin.lock_timeout.min(GROUP_LOCK_WAIT);
        let mut tx = inner.store.begin(&begin).await?;
        if let Err((at, e)) = self.handle_each(&mut tx, rows).await {
            tx.rollback().await?;
            return Ok(Some((FallBack::Handler(is_lock_conflict(&e)), Some(at))));
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let failed = match inner.store.complete_batch(&mut *tx, &ids, token).await {
            Ok(done) if done.len() == ids.len() => {
                tx.commit().await?;
                return Ok(None);
            }
            Ok(_) => FallBack::LostClaim,
            Err(_) => FallBack::Completion,
        };
        tx.rollback().await?;
        Ok(Some((failed, None)))
    }

    /// Logs and counts a batch that is redone row by row, naming why.
    fn fell_back(&self, cause: FallBack, detail: &str, rows: &[InboxRow]) {
        warn!(
            cause = cause.label(),
            error = detail,
            rows = rows.len(),
            first_row = rows.first().map(|r| r.id),
            "batch fell back to one transaction per row"
        );
        metrics::counter!(m::BATCH_FALLBACKS_TOTAL, "consumer" => self.inner.consumer.as_str().to_owned(), "cause" => cause.label())
            .increment(1);
    }

    fn count(&self, report: &BatchReport) {
        let consumer = self.inner.consumer.as_str().to_owned();
        let outcomes = [
            ("done", report.done),
            ("retrying", report.retrying),
            ("dead", report.dead),
            ("lost", report.lost),
        ];
        for (outcome, n) in outcomes {
            if n > 0 {
                metrics::counter!(m::ROWS_TOTAL, "consumer" => consumer.clone(), "outcome" => outcome).increment(n);
            }
        }
    }

    /// The optimistic path: the whole batch through [`Handler::handle_batch`] in one
    /// transaction, then one fenced statement completes them all. When any handler failed, a
    /// claim was lost or the completion failed (a handler that swallowed a failed statement
    /// leaves the transaction aborted), it rolls back and says why: the batch is then redone
    /// row by row, each row in a transaction of its own, where each row's fate is decided
    /// alone. Handlers may therefore run twice for a batch with a failure; only the second run
    /// can commit.
    async fn fast_path(
        &self,
        rows: &[InboxRow],
        token: &ClaimToken,
    ) -> Result<FastPath, StoreError> {
        let inner = &*self.inner;
        let mut tx = inner.store.begin(&inner.config.begin).await?;
        let msgs: Vec<&crate::Envelope> = rows.iter().map(|r| &r.envelope).collect();
        let span = crate::trace::spans::process_batch(
            None,
            &inner.consumer,
            msgs.iter().copied(),
            msgs.len(),
        );
        let handled = call_guarded_batch(
            &inner.handler,
            &msgs,
            &mut *tx,
            inner.config.handler_timeout,
        )
        .instrument(span)
        .await;
        let failed = match handled {
            Err(e) => Some(FastPath::Failed(FallBack::Handler(
                matches!(&e, HandlerError::Transient(_)) && is_lock_conflict(&e),
            ))),
            Ok(()) => None,
        };
        if let Some(failed) = failed {
            tx.rollback().await?;
            return Ok(failed);
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        match inner.store.complete_batch(&mut *tx, &ids, token).await {
            Ok(done) if done.len() == ids.len() => {
                tx.commit().await?;
                Ok(FastPath::Done)
            }
            Ok(_) => {
                tx.rollback().await?;
                Ok(FastPath::Failed(FallBack::LostClaim))
            }
            Err(_) => {
                tx.rollback().await?;
                Ok(FastPath::Failed(FallBack::Completion))
            }
        }
    }

    /// `handle` for each of `rows`, in order, through `tx`, under the per-message deadline; the
    /// first failure ends it, with the failing row's position.
    pub(super) async fn handle_each(
        &self,
        tx: &mut <S::Db as Driver>::Transaction,
        rows: &[InboxRow],
    ) -> Result<(), (usize, HandlerError)> {
        let inner = &*self.inner;
        for (at, row) in rows.iter().enumerate() {
            call_guarded(
                &inner.handler,
                &row.envelope,
                &mut **tx,
                inner.config.handler_timeout,
            )
            .await
            .map_err(|e| (at, e))?;
        }
        Ok(())
    }
}

/// What the fast path came to.
enum FastPath {
    /// Every row done, committed once.
    Done,
    /// Rolled back; the rows run one per transaction.
    Failed(FallBack),
}

/// Why a batch fell back to one transaction per row (the `cause` label of
/// `inboxed_batch_fallbacks_total`).
#[derive(Debug, Clone, Copy)]
enum FallBack {
    /// A handler failed; `true` when on a lock conflict (deadlock, serialization failure,
    /// lock timeout).
    Handler(bool),
    /// A row's claim was lost to the reaper before the completion.
    LostClaim,
    /// The completion failed after the handler returned `Ok`.
    Completion,
    /// The batch's transaction could not begin or commit.
    Transaction,
}

impl FallBack {
    fn label(self) -> &'static str {
        match self {
            Self::Handler(true) => "lock_conflict",
            Self::Handler(false) => "handler_error",
            Self::LostClaim => "lost_claim",
            Self::Completion => "completion_failed",
            Self::Transaction => "transaction_failed",
        }
    }
}

impl std::fmt::Display for FallBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Handler(true) => {
                "a handler hit a lock conflict (deadlock, serialization failure or lock timeout)"
            }
            Self::Handler(false) => "a handler returned an error",
            Self::LostClaim => "a row's claim was lost before the completion",
            Self::Completion => "the completion failed after the handlers returned Ok",
            Self::Transaction => "the batch's transaction failed",
        })
    }
}

/// Longest wait of a row group's statements for a lock another transaction holds. Groups of a
/// moment's work wait less than this on each other; past it, the wait is contention (or a
/// deadlock, which PostgreSQL would only break after its `deadlock_timeout` of a second).
const GROUP_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether a handler's error comes from a lock conflict (a deadlock, a serialization failure,
/// a lock wait given up, SQLite's busy write lock), as [`StoreError`] classifies it.
fn is_lock_conflict(e: &HandlerError) -> bool {
    std::error::Error::source(e).is_some_and(StoreError::is_lock_conflict_in)
}
