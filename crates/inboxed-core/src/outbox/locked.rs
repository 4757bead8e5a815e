//! The relay's lock-held claim: one transaction locks a batch, stays open through its publish
//! and marks it, so a row costs one new version (none when sent rows are deleted) and a
//! batch one commit, against two of each under a lease.
//!
//! The row locks are the lease, so a relay that dies lets go of its rows as its connection
//! closes, and every change of its transaction goes with it, attempts included. What is left
//! is the batch's record, written on another connection before the publish
//! ([`OutboxStore::hold_outbox`]) and deleted by the marking statement: the reaper counts the
//! attempt of the rows of a record whose transaction is over, and halves the batch, so a row
//! that kills its relay still ends dead instead of taking the relay down forever.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::marks::{Verdict, count, failed_row, handed_back, verdicts, within_group_limit};
use super::publish::Publisher;
use super::relay::{OutboxRelay, OutboxRelayReport};
use super::store::{ClaimToken, LockOutboxParams, MarkParams, OutboxFate, OutboxStore};
use crate::driver::Transaction as _;
use crate::error::Error;
use crate::store::BeginParams;
use tracing::Instrument;

/// How often at most a relay's loops judge dead relays' batches before a batch: a batch that
/// starts within this of a relay's death may take its rows whole once more (and, if one of them
/// killed it, die too; the halving then counts both deaths).
const JUDGE_EVERY_MS: u64 = 100;

impl<S: OutboxStore, P: Publisher> OutboxRelay<S, P> {
    pub(super) async fn run_locked(&self) -> Result<OutboxRelayReport, Error> {
        let inner = &*self.inner;
        let config = &inner.config;
        if !inner.store.locks_outbox() {
            return Err(crate::engine::outbox::LEASE_ONLY.into());
        }
        // Batches whose relay died are judged before this one locks: taken again whole first,
        // a row that killed another relay would take this one down with its whole batch. A
        // statement on a table of a few rows, before the transaction, so that this loop never
        // holds one connection while it waits for another here; at most every
        // JUDGE_EVERY per relay, so that a relay draining a backlog does not pay it a batch.
        let now = u64::try_from(inner.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = inner.judged_at.load(Ordering::Relaxed);
        if (last == u64::MAX || now.saturating_sub(last) >= JUDGE_EVERY_MS)
            && inner
                .judged_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let judged = inner
                .store
                .reap_unmarked_outbox(config.max_attempts)
                .await?;
            if judged > 0 {
                super::marks::judged(judged);
            }
        }
        // A publish is an idle gap in the transaction: the lease bounds it, as it bounds a
        // leased batch, so a hung relay's rows come free.
        let begin = BeginParams {
            idle_in_transaction_timeout: config.lease.max(Duration::from_secs(1)),
            ..BeginParams::default()
        };
        let mut limit = config.batch_size.max(1);
        let crash = &config.crash_attribution;
        let (mut turn, mut waited) = (crash.shared().await, false);
        let (mut tx, rows, lock_key) = loop {
            // A key of its own for each try: a lock an engine lets go of only after the
            // transaction (MySQL's named lock, released as the connection goes back to the
            // pool) may still be held by the try before.
            let lock_key = fastrand::i64(..);
            let mut tx = inner.store.begin(&begin).await?;
            let params = LockOutboxParams {
                limit,
                lock_key,
                now: None,
            };
            let mut rows = inner.store.lock_outbox(&mut tx, &params).await?;
            if !waited && turn.is_shared() && rows.iter().any(|r| r.group_limit.is_some()) {
                // Rows of a batch that died run alone in their scope (see
                // `CrashAttribution`), locked again once it is theirs: no lock is held while
                // the rest of the scope ends.
                tx.rollback().await?;
                drop(turn);
                turn = crash
                    .alone(crash.waiting("outbox_rows", 1), config.lease / 2)
                    .await;
                waited = true;
                continue;
            }
            let cut = within_group_limit(&mut rows);
            if cut.is_empty() || limit == 1 {
                break (tx, rows, lock_key);
            }
            // A row of a crashed batch limits this one: lock again at that size, so that the
            // rows past it are not held through the publish, away from other relays.
            tx.rollback().await?;
            limit = u32::try_from(rows.len()).unwrap_or(1).max(1);
        };
        let mut report = OutboxRelayReport {
            claimed: rows.len() as u64,
            ..OutboxRelayReport::default()
        };
        if rows.is_empty() {
            tx.rollback().await?;
            return Ok(report);
        }
        let token = ClaimToken::random();
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        inner
            .store
            .hold_outbox(&token, lock_key, &inner.id, &ids)
            .await?;
        let span = crate::trace::spans::send(inner.publisher.system(), &rows);
        let published = inner.publisher.publish(&rows).instrument(span).await;
        let verdicts = verdicts(&rows, published);
        let mut fates = Vec::with_capacity(rows.len());
        let (mut not_sent, mut unreachable) = (0, None);
        for (row, verdict) in rows.iter().zip(verdicts) {
            let (status, error, backoff) = match verdict {
                Verdict::Confirmed => {
                    report.sent += 1;
                    ("sent", None, Duration::ZERO)
                }
                Verdict::Failed { reason, permanent } => {
                    let dead = permanent || row.attempts >= config.max_attempts;
                    failed_row(row, &reason, dead, &mut report);
                    let status = if dead { "dead" } else { "pending" };
                    (status, Some(reason), config.backoff.delay(row.attempts))
                }
                Verdict::NotSent(reason) => {
                    // Nothing reached the broker: left as it was, its attempt not counted.
                    not_sent += 1;
                    unreachable.get_or_insert(reason);
                    continue;
                }
            };
            fates.push(OutboxFate {
                id: row.id,
                status,
                error,
                backoff,
                attempts: row.attempts,
            });
        }
        inner
            .store
            .mark_outbox(
                &mut tx,
                &MarkParams {
                    token: &token,
                    fates: &fates,
                    delete_sent: self.keeps_no_sent_rows(),
                    relay: &inner.id,
                },
            )
            .await?;
        tx.commit().await?;
        if let Some(reason) = unreachable {
            report.handed_back = not_sent;
            handed_back(usize::try_from(not_sent).unwrap_or(usize::MAX), &reason);
        }
        count(&report);
        Ok(report)
    }
}
