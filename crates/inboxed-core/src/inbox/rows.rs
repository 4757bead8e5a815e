//! One row at a time, each in a transaction of its own: where a batch falls back to, and
//! where a row's failure is recorded (or, in an outage, forgiven).

use tracing::{Instrument, debug, warn};

use super::store::{
    ClaimToken, CompleteParams, Completed, FailParams, Failed, InboxRow, InboxStore,
};
use super::worker::{BatchReport, Worker};
use crate::driver::Transaction as _;
use crate::error::{Error, HandlerError, StoreError, error_chain};
use crate::handler::Handler;

impl<S: InboxStore, H: Handler<S::Db>> Worker<S, H> {
    /// Each row in a transaction of its own; failures recorded in their own transactions.
    pub(super) async fn run_rows(
        &self,
        rows: Vec<InboxRow>,
        token: &ClaimToken,
        report: &mut BatchReport,
    ) -> Result<(), Error> {
        let inner = &*self.inner;
        for row in rows {
            let span = crate::trace::spans::row(&inner.consumer, &row);
            let run = self.run_row(&row, token).instrument(span.clone()).await;
            let (failure, permanent, after) = match run {
                Ok(Ok(Completed::Done)) => {
                    span.record("inboxed.outcome", "processed");
                    report.done += 1;
                    continue;
                }
                Ok(Ok(_)) => {
                    report.lost += 1;
                    continue;
                }
                Ok(Err(e)) => {
                    let after = match &e {
                        HandlerError::RetryAfter { after, .. } => Some(*after),
                        _ => None,
                    };
                    (
                        error_chain(&e),
                        matches!(e, HandlerError::Permanent(_)),
                        after,
                    )
                }
                // The row's own transaction did not commit (a deferred constraint, a lost
                // connection): the row's failure, retried after its backoff like a transient
                // handler error, and dead after its attempts.
                Err(e) => (
                    format!("the row's transaction failed: {}", error_chain(&e)),
                    false,
                    None,
                ),
            };
            crate::trace::spans::failed(&span, &failure);
            if let Some(after) = after {
                // Not the message's fault, by the handler's word: back after `after` (at least
                // a poll's interval: a `Retry-After: 0` must not spin on the row), its attempt
                // given back; the switch hears of it, charging nothing.
                let after = after.max(inner.config.poll_interval);
                let _ = inner
                    .config
                    .kill_switch
                    .failed(&inner.consumer, row.envelope.id(), false);
                debug!(
                    row = row.id,
                    error = failure,
                    ?after,
                    "row asked to be retried later"
                );
                inner.store.release(token, &[row.id], after).await?;
                report.retrying += 1;
                continue;
            }
            if permanent {
                inner.config.kill_switch.succeeded();
            } else if self.forgiven(&row, token, &failure, report).await? {
                continue;
            }
            let backoff = inner.config.ladder.delay(row.attempts);
            if self
                .fail_row(row.id, token, &failure, backoff, permanent, report)
                .await?
                == Failed::Dead
            {
                warn!(row = row.id, message_id = %row.envelope.id(), error = failure, "row is dead");
            }
        }
        Ok(())
    }

    /// Tells the kill switch that `row` failed transiently. While the switch is open (or this
    /// failure opened it) the row is handed back with its attempt given back, and this returns
    /// `true`; the rows that failed before it opened were failed already, each with its
    /// attempt (one, for rows of distinct messages).
    pub(super) async fn forgiven(
        &self,
        row: &InboxRow,
        token: &ClaimToken,
        error: &str,
        report: &mut BatchReport,
    ) -> Result<bool, Error> {
        let inner = &*self.inner;
        let judged = inner
            .config
            .kill_switch
            .failed(&inner.consumer, row.envelope.id(), true);
        if matches!(judged, crate::kill_switch::Judged::Charged { .. }) {
            return Ok(false);
        }
        debug!(
            row = row.id,
            error, "row failed while the kill switch is open; handed back, attempt given back"
        );
        inner
            .store
            .release(token, &[row.id], std::time::Duration::ZERO)
            .await?;
        report.retrying += 1;
        Ok(true)
    }

    /// Records one row's failure (fenced by the token) and tallies what became of it.
    pub(super) async fn fail_row(
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

    /// One row in a transaction of its own: the handler, the fenced completion, the commit.
    /// The outer `Err` is a failure of the transaction itself (its begin or commit); the inner
    /// one the handler's, or a completion that found the claim lost.
    pub(super) async fn run_row(
        &self,
        row: &InboxRow,
        token: &ClaimToken,
    ) -> Result<Result<Completed, HandlerError>, StoreError> {
        let inner = &*self.inner;
        let mut tx = inner.store.begin(&inner.config.begin).await?;
        let handled = self
            .handle_each(&mut tx, std::slice::from_ref(row))
            .await
            .map_err(|(_, e)| e);
        let result = match handled {
            Ok(()) => {
                let params = CompleteParams { id: row.id, token };
                // Also the probe for a handler that swallowed a failed statement (PostgreSQL
                // then refuses every statement until the transaction is rolled back).
                match inner.store.complete(&mut *tx, &params).await {
                    Ok(Completed::Done) => {
                        tx.commit().await?;
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
        tx.rollback().await?;
        Ok(result)
    }
}
