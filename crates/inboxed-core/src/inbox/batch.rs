//! One claimed batch (lease mode): optimistically one transaction for every handler and one
//! fenced completion; after a failure, a savepoint per row with its own fenced completion; then
//! failures recorded in their own transactions.

use sqlx::Acquire;
use tracing::{Instrument, warn};

use super::store::{
    ClaimToken, CompleteParams, Completed, FailParams, Failed, InboxRow, InboxStore,
};
use super::worker::{BatchReport, Worker};
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
            Heartbeat(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if let Err(e) = store.extend_leases(&token, lease).await {
                        warn!(error = %e, "could not extend the batch's lease");
                    }
                }
            }))
        };
        // A fast path that could not even commit goes the slow way too; if the batch cannot
        // commit there either, its rows are failed one by one below.
        let fast = self.fast_path(&rows, &token).await.unwrap_or_else(|e| {
            warn!(error = %e, "batch fast path failed; redoing the batch row by row");
            false
        });
        if fast {
            report.done = report.claimed;
            self.count(&report);
            return Ok(report);
        }
        let report_rows: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let mut failures: Vec<(InboxRow, HandlerError)> = Vec::new();
        let committed = async {
            let mut tx = inner.store.begin(&inner.config.begin).await?;
            for row in rows {
                let span = tracing::info_span!("inboxed.work", row = row.id, message_id = %row.envelope.id(), consumer = %inner.consumer);
                let outcome = self.process_row(&mut tx, &row, &token).instrument(span).await?;
                match outcome {
                    Ok(Completed::Done) => report.done += 1,
                    Ok(_) => report.lost += 1,
                    Err(e) => failures.push((row, e)),
                }
            }
            tx.commit().await.map_err(StoreError::from_sqlx)
        }
        .await;
        if let Err(e) = committed {
            // Nothing of the batch is done. Each row is recorded as failed (its attempt kept,
            // available again at once, marked so that it runs alone next time): a row whose
            // commit always fails (a deferred constraint) then spends only its own attempts
            // and goes dead, instead of retrying the whole batch for ever.
            warn!(error = %e, rows = report_rows.len(), "batch could not commit; its rows will run one at a time");
            let error = format!("batch commit failed: {}", error_chain(&e));
            let mut report = BatchReport {
                claimed: report.claimed,
                ..BatchReport::default()
            };
            for id in report_rows {
                let zero = std::time::Duration::ZERO;
                self.fail_row(id, &token, &error, zero, false, &mut report)
                    .await?;
            }
            self.count(&report);
            return Ok(report);
        }
        for (row, err) in failures {
            let chain = error_chain(&err);
            let backoff = inner.config.backoff.delay(row.attempts);
            let permanent = matches!(err, HandlerError::Permanent(_));
            if self
                .fail_row(row.id, &token, &chain, backoff, permanent, &mut report)
                .await?
                == Failed::Dead
            {
                warn!(row = row.id, message_id = %row.envelope.id(), error = chain, "row is dead");
            }
        }
        self.count(&report);
        Ok(report)
    }

    /// Records one row's failure (fenced by the token) and tallies what became of it.
    async fn fail_row(
        &self,
        id: i64,
        token: &ClaimToken,
        error: &str,
        backoff: std::time::Duration,
        permanent: bool,
        report: &mut BatchReport,
    ) -> Result<Failed, Error> {
        let inner = &*self.inner;
        let params = FailParams {
            id,
            token,
            error,
            backoff,
            max_attempts: inner.config.max_attempts,
            permanent,
            now: None,
        };
        let failed = inner.store.fail(&params).await?;
        match failed {
            Failed::Dead => report.dead += 1,
            Failed::Retrying => report.retrying += 1,
            _ => report.lost += 1,
        }
        Ok(failed)
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

    /// The optimistic path: the whole batch through [`Handler::handle_batch`] in one transaction
    /// without savepoints, then one fenced statement completes them all. Savepoints cost two round trips a row,
    /// which dominate short handlers. Returns `false` (after rolling back) when any handler
    /// failed, a claim was lost, or the completion failed (a handler that swallowed a failed
    /// statement leaves the transaction aborted): the batch is then redone row by row behind
    /// savepoints, where each row's fate is decided on its own. Handlers may therefore run twice
    /// for a batch with a failure; only the second run can commit.
    async fn fast_path(&self, rows: &[InboxRow], token: &ClaimToken) -> Result<bool, StoreError> {
        let inner = &*self.inner;
        let mut tx = inner.store.begin(&inner.config.begin).await?;
        let msgs: Vec<&crate::Envelope> = rows.iter().map(|r| &r.envelope).collect();
        let span = tracing::info_span!("inboxed.work_batch", rows = rows.len(), first_row = rows.first().map(|r| r.id), consumer = %inner.consumer);
        let handled = call_guarded_batch(
            &inner.handler,
            &msgs,
            &mut *tx,
            inner.config.handler_timeout,
        )
        .instrument(span)
        .await;
        if handled.is_err() {
            tx.rollback().await.map_err(StoreError::from_sqlx)?;
            return Ok(false);
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        match inner.store.complete_batch(&mut *tx, &ids, token).await {
            Ok(done) if done.len() == ids.len() => {
                tx.commit().await.map_err(StoreError::from_sqlx)?;
                Ok(true)
            }
            _ => {
                tx.rollback().await.map_err(StoreError::from_sqlx)?;
                Ok(false)
            }
        }
    }

    /// One row behind a savepoint: the handler, then the fenced completion. The outer `Err` is
    /// a failure of the batch transaction itself; the inner one the row's failure.
    async fn process_row(
        &self,
        tx: &mut sqlx::Transaction<'static, S::Db>,
        row: &InboxRow,
        token: &ClaimToken,
    ) -> Result<Result<Completed, HandlerError>, StoreError> {
        let inner = &*self.inner;
        let mut savepoint = tx.begin().await.map_err(StoreError::from_sqlx)?;
        let handled = call_guarded(
            &inner.handler,
            &row.envelope,
            &mut *savepoint,
            inner.config.handler_timeout,
        )
        .await;
        let result = match handled {
            Ok(()) => {
                let params = CompleteParams { id: row.id, token };
                // Also the probe for a handler that swallowed a failed statement (PostgreSQL
                // then refuses every statement until the savepoint is rolled back).
                match inner.store.complete(&mut *savepoint, &params).await {
                    Ok(Completed::Done) => {
                        savepoint.commit().await.map_err(StoreError::from_sqlx)?;
                        return Ok(Ok(Completed::Done));
                    }
                    Ok(other) => Ok(other),
                    Err(e) => Err(HandlerError::transient(format!(
                        "completing the row failed after the handler returned Ok (did it swallow a database error?): {}",
                        error_chain(&e)
                    ))),
                }
            }
            Err(e) => Err(e),
        };
        savepoint.rollback().await.map_err(StoreError::from_sqlx)?;
        Ok(result)
    }
}
