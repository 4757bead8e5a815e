//! The lock-held claim mode: one transaction locks a batch, runs its handlers and settles it.

use tracing::Instrument;

use super::store::{InboxRow, InboxStore, LockBatchParams, RowFate};
use super::worker::{BatchReport, Worker};
use crate::driver::{Driver, Transaction as _};
use crate::error::{Error, HandlerError, StoreError, error_chain};
use crate::handler::{Handler, call_guarded, call_guarded_batch};

impl<S: InboxStore, H: Handler<S::Db>> Worker<S, H> {
    /// Locks up to `batch_size` rows (`FOR UPDATE SKIP LOCKED`), counts a claim of each in a
    /// transaction of its own, dead-letters rows claimed too often without ever finishing,
    /// runs the other rows optimistically through one `handle_batch` behind one savepoint (row by row behind their own
    /// savepoints after a failure), settles every row, and commits once.
    pub(super) async fn run_locked(&self, limit: u32) -> Result<BatchReport, Error> {
        let inner = &*self.inner;
        let mut tx = inner.store.begin(&inner.config.begin).await?;
        let params = LockBatchParams {
            consumer: &inner.consumer,
            limit,
            now: None,
            ordered: inner.config.ordered,
            park: inner.config.on_dead == super::config::OnDead::Park,
        };
        let mut rows = inner.store.lock_batch(&mut tx, &params).await?;
        if rows.is_empty() {
            tx.rollback().await?;
            return Ok(BatchReport::default());
        }
        rows.sort_by_key(|r| r.id);
        // A row whose last claim never settled (lock_batch.sql gives it a group limit of 1) runs
        // alone; the rest stay locked but untouched and uncounted until this transaction ends
        // (see Worker::isolate_suspect).
        if let Some(first) = rows.iter().position(|r| r.group_limit.is_some()) {
            let suspect = rows.swap_remove(first);
            rows = vec![suspect];
        }
        let ids: Vec<String> = rows
            .iter()
            .map(|r| r.envelope.id().as_str().to_owned())
            .collect();
        let counts = inner.store.count_attempts(&inner.consumer, &ids).await?;
        let mut report = BatchReport {
            claimed: rows.len() as u64,
            ..BatchReport::default()
        };
        let mut fates = Vec::with_capacity(rows.len());
        let mut runnable = Vec::with_capacity(rows.len());
        for row in rows {
            let claims = counts
                .iter()
                .find(|(id, _)| id == row.envelope.id().as_str())
                .map_or(1, |(_, n)| *n);
            let attempt = row.attempts + claims;
            if attempt > inner.config.max_attempts {
                let error = format!(
                    "claimed {claims} times without finishing: its worker died or hung each time"
                );
                fates.push(fate(&row, "dead", Some(error), attempt, self));
                report.dead += 1;
            } else if let Err(wait) = inner.config.rate_limit.check_bucket(&row.envelope, true) {
                // Over its bucket's rate limit: back to pending until its slot, its last error
                // kept, charged every earlier claim that never finished but not this one (the
                // claim counters are forgotten with the fates).
                let mut deferred = fate(&row, "pending", None, attempt - 1, self);
                deferred.backoff = wait;
                fates.push(deferred);
                report.deferred += 1;
            } else {
                runnable.push((row, attempt));
            }
        }
        let all_ok = {
            let mut all = S::Db::savepoint(&mut tx).await?;
            let msgs: Vec<&crate::Envelope> = runnable.iter().map(|(r, _)| &r.envelope).collect();
            let span = crate::trace::spans::process_batch(
                None,
                &inner.consumer,
                msgs.iter().copied(),
                msgs.len(),
            );
            let ok = msgs.is_empty()
                || call_guarded_batch(
                    &inner.handler,
                    &msgs,
                    &mut all,
                    inner.config.handler_timeout,
                )
                .instrument(span)
                .await
                .is_ok();
            // Releasing the savepoint also fails if a handler swallowed a failed statement
            // (PostgreSQL: the rows run one by one behind savepoints of their own) or the
            // server rolled the whole transaction back (InnoDB's deadlock victim: the batch
            // ends here, since anything run now would commit on its own).
            if ok {
                match all.commit().await {
                    Ok(()) => true,
                    Err(e @ StoreError::TransactionEnded(_)) => return Err(e.into()),
                    Err(_) => false,
                }
            } else {
                all.rollback().await?;
                false
            }
        };
        for (row, attempt) in runnable {
            if all_ok {
                fates.push(fate(&row, "done", None, attempt, self));
                report.done += 1;
                continue;
            }
            let mut one = S::Db::savepoint(&mut tx).await?;
            let handled = match self.handle(&row, &mut one).await {
                Ok(()) => match one.commit().await {
                    Ok(()) => Ok(()),
                    Err(e @ StoreError::TransactionEnded(_)) => return Err(e.into()),
                    Err(e) => Err(HandlerError::transient(e)),
                },
                Err(e) => {
                    one.rollback().await?;
                    Err(e)
                }
            };
            match handled {
                Ok(()) => {
                    fates.push(fate(&row, "done", None, attempt, self));
                    report.done += 1;
                }
                Err(HandlerError::RetryAfter { after, source }) => {
                    // Not the message's fault, by the handler's word: back after `after`, this
                    // claim's attempt given back.
                    let error = Some(error_chain(source.as_ref()));
                    let mut later = fate(&row, "pending", error, attempt.saturating_sub(1), self);
                    later.backoff = after.max(inner.config.poll_interval);
                    fates.push(later);
                    report.retrying += 1;
                }
                Err(e) => {
                    let dead = matches!(e, HandlerError::Permanent(_))
                        || attempt >= inner.config.max_attempts;
                    let status = if dead { "dead" } else { "pending" };
                    fates.push(fate(&row, status, Some(error_chain(&e)), attempt, self));
                    if dead {
                        report.dead += 1
                    } else {
                        report.retrying += 1
                    }
                }
            }
        }
        if report.deferred > 0 {
            metrics::counter!(crate::metrics::RATE_LIMITED_TOTAL, "consumer" => inner.consumer.as_str().to_owned(), "action" => "deferred")
                .increment(report.deferred);
        }
        inner
            .store
            .finish_locked(&mut tx, &inner.consumer, &fates)
            .await?;
        tx.commit().await?;
        Ok(report)
    }

    async fn handle(
        &self,
        row: &InboxRow,
        conn: &mut <S::Db as Driver>::Connection,
    ) -> Result<(), HandlerError> {
        let inner = &*self.inner;
        let span = crate::trace::spans::row(&inner.consumer, row);
        let handled = call_guarded(
            &inner.handler,
            &row.envelope,
            conn,
            inner.config.handler_timeout,
        )
        .instrument(span.clone())
        .await;
        if let Err(e) = &handled {
            crate::trace::spans::failed(&span, &error_chain(e));
        } else {
            span.record("inboxed.outcome", "processed");
        }
        handled
    }
}

fn fate<S, H>(
    row: &InboxRow,
    status: &'static str,
    error: Option<String>,
    attempts: u32,
    w: &Worker<S, H>,
) -> RowFate {
    RowFate {
        id: row.id,
        message_id: row.envelope.id().as_str().to_owned(),
        status,
        error,
        backoff: w.inner.config.ladder.delay(attempts),
        attempts,
    }
}
