//! [`InboxStore`] for SQLite: the store-then-process operations. Times are integer
//! milliseconds; id lists travel as JSON arrays.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    ClaimBatchParams, ClaimToken, CompleteParams, Completed, EnqueueManyParams, EnqueueParams,
    Enqueued, FailParams, Failed, InboxRow, InboxStore, LockBatchParams, ReleaseStaleParams,
    ReplayParams, Replayed, RowFate, Subscription, millis, millis_of,
};
use inboxed_core::{ConsumerName, Envelope, PayloadHash, StoreError};

use crate::SqliteStore;

fn row_to_inbox(row: &SqliteRow) -> Result<InboxRow, StoreError> {
    let get = StoreError::from_sqlx;
    InboxRow::from_columns(
        row.try_get(0).map_err(get)?,
        row.try_get(1).map_err(get)?,
        row.try_get(2).map_err(get)?,
        row.try_get(3).map_err(get)?,
        row.try_get(4).map_err(get)?,
        row.try_get(5).map_err(get)?,
        row.try_get(6).map_err(get)?,
        row.try_get::<Option<bool>, _>(7)
            .map_err(get)?
            .unwrap_or(false),
        row.try_get(8).map_err(get)?,
    )
}

/// SQLite has no row locks, and its one writer would make a lock-held batch block every other
/// worker (and the attempt counter, which must commit separately) until it ends.
const LOCK_HELD_UNSUPPORTED: StoreError = StoreError::Unsupported {
    operation: "ClaimMode::LockHeld",
    reason: "SQLite has no row locks; use ClaimMode::Lease",
};

impl SqliteStore {
    /// One receipt on `conn`: autocommitted, or a step of a batch's transaction, where a key
    /// given earlier in the batch is seen by the lookup.
    async fn enqueue_on(
        &self,
        conn: &mut SqliteConnection,
        consumer: &ConsumerName,
        env: &Envelope,
    ) -> Result<Enqueued, StoreError> {
        let row = self
            .query(&self.queries.enqueue)
            .bind(consumer.as_str())
            .bind(env.id().as_str())
            .bind(env.aggregate_id())
            .bind(env.message_type())
            .bind(env.correlation_id())
            .bind(env.payload())
            .bind(env.hash().as_bytes().as_slice())
            .fetch_optional(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?;
        if let Some(row) = row {
            return Ok(Enqueued::Stored {
                id: row.try_get(0).map_err(StoreError::from_sqlx)?,
            });
        }
        let stored: Option<Vec<u8>> = self
            .query(&self.queries.enqueue_lookup)
            .bind(consumer.as_str())
            .bind(env.id().as_str())
            .fetch_optional(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(StoreError::from_sqlx)?;
        Ok(match stored.as_deref().and_then(PayloadHash::from_slice) {
            Some(stored) if stored != env.hash() => Enqueued::Conflict {
                stored,
                received: env.hash(),
            },
            _ => Enqueued::Duplicate,
        })
    }
}

fn json_ids(ids: &[i64]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".into())
}

impl InboxStore for SqliteStore {
    fn max_concurrent_batches(&self) -> Option<usize> {
        // One writer: a second loop would claim rows (counting attempts, starting leases) and
        // then wait behind the first batch's write lock.
        Some(1)
    }

    async fn enqueue(&self, p: &EnqueueParams<'_>) -> Result<Enqueued, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(StoreError::from_sqlx)?;
        self.enqueue_on(&mut conn, p.consumer, p.envelope).await
    }

    async fn enqueue_many(&self, p: &EnqueueManyParams<'_>) -> Result<Vec<Enqueued>, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from_sqlx)?;
        let mut outcomes = Vec::with_capacity(p.envelopes.len());
        for envelope in p.envelopes {
            outcomes.push(self.enqueue_on(&mut tx, p.consumer, envelope).await?);
        }
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(outcomes)
    }

    async fn claim_batch(&self, p: &ClaimBatchParams<'_>) -> Result<Vec<InboxRow>, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from_sqlx)?;
        let rows = self
            .query(&self.queries.claim_batch)
            .bind(p.consumer.as_str())
            .bind(p.worker)
            .bind(p.token.as_bytes().as_slice())
            .bind(i64::from(p.limit))
            .bind(millis_of(p.lease))
            .bind(p.now.map(millis))
            .bind(p.ordered)
            .bind(p.park)
            .fetch_all(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        rows.iter().map(row_to_inbox).collect()
    }

    async fn complete(
        &self,
        conn: &mut SqliteConnection,
        p: &CompleteParams<'_>,
    ) -> Result<Completed, StoreError> {
        let done = self
            .query(&self.queries.complete)
            .bind(p.id)
            .bind(p.token.as_bytes().as_slice())
            .execute(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(if done.rows_affected() == 1 {
            Completed::Done
        } else {
            Completed::LostClaim
        })
    }

    async fn complete_batch(
        &self,
        conn: &mut SqliteConnection,
        ids: &[i64],
        token: &ClaimToken,
    ) -> Result<Vec<i64>, StoreError> {
        self.query(&self.queries.complete_batch)
            .bind(json_ids(ids))
            .bind(token.as_bytes().as_slice())
            .fetch_all(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?
            .iter()
            .map(|r| r.try_get(0).map_err(StoreError::from_sqlx))
            .collect()
    }

    async fn lock_batch(
        &self,
        _conn: &mut SqliteConnection,
        _p: &LockBatchParams<'_>,
    ) -> Result<Vec<InboxRow>, StoreError> {
        Err(LOCK_HELD_UNSUPPORTED)
    }

    async fn count_attempts(
        &self,
        _consumer: &ConsumerName,
        _ids: &[String],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        Err(LOCK_HELD_UNSUPPORTED)
    }

    async fn finish_locked(
        &self,
        _conn: &mut SqliteConnection,
        _consumer: &ConsumerName,
        _fates: &[RowFate],
    ) -> Result<(), StoreError> {
        Err(LOCK_HELD_UNSUPPORTED)
    }

    async fn fail(&self, p: &FailParams<'_>) -> Result<Failed, StoreError> {
        let status: Option<String> = self
            .query(&self.queries.fail)
            .bind(p.id)
            .bind(p.token.as_bytes().as_slice())
            .bind(p.error)
            .bind(millis_of(p.backoff))
            .bind(i64::from(p.max_attempts))
            .bind(p.permanent)
            .bind(p.now.map(millis))
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(StoreError::from_sqlx)?;
        Ok(match status.as_deref() {
            None => Failed::LostClaim,
            Some("dead") => Failed::Dead,
            Some(_) => Failed::Retrying,
        })
    }

    async fn extend_leases(&self, token: &ClaimToken, lease: Duration) -> Result<u64, StoreError> {
        let done = self
            .query(&self.queries.extend_leases)
            .bind(token.as_bytes().as_slice())
            .bind(millis_of(lease))
            .bind(None::<i64>)
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(done.rows_affected())
    }

    async fn release(&self, token: &ClaimToken, ids: Option<&[i64]>) -> Result<u64, StoreError> {
        let done = self
            .query(&self.queries.release)
            .bind(token.as_bytes().as_slice())
            .bind(ids.map(json_ids))
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(done.rows_affected())
    }

    async fn release_stale(&self, p: &ReleaseStaleParams<'_>) -> Result<u64, StoreError> {
        let done = self
            .query(&self.queries.release_stale)
            .bind(i64::from(p.max_attempts))
            .bind(i64::from(p.limit))
            .bind(p.now.map(millis))
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(done.rows_affected())
    }

    async fn replay(&self, p: &ReplayParams<'_>) -> Result<Replayed, StoreError> {
        let sel = p.selector;
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from_sqlx)?;
        let rows = self
            .query(&self.queries.replay_select)
            .bind(p.consumer.as_str())
            .bind(sel.ids.as_deref().map(json_ids))
            .bind(sel.aggregate_id.as_deref())
            .bind(sel.received_from.map(millis))
            .bind(sel.received_before.map(millis))
            .bind(p.include_done)
            .fetch_all(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        let mut out = Replayed::default();
        for row in &rows {
            out.ids.push(row.try_get(0).map_err(StoreError::from_sqlx)?);
            let was_done: bool = row.try_get(1).map_err(StoreError::from_sqlx)?;
            out.done_rows += u64::from(was_done);
        }
        if out.ids.is_empty() {
            return Ok(out);
        }
        let ids = json_ids(&out.ids);
        self.query(&self.queries.replay_reset)
            .bind(&ids)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        self.query(&self.queries.replay_audit)
            .bind(p.actor)
            .bind(p.reason)
            .bind(p.consumer.as_str())
            .bind(format!("{sel:?}"))
            .bind(i64::try_from(out.ids.len()).unwrap_or(i64::MAX))
            .bind(i64::try_from(out.done_rows).unwrap_or(i64::MAX))
            .bind(&ids)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(out)
    }

    async fn notify(&self, _consumer: &ConsumerName) -> Result<(), StoreError> {
        Ok(()) // no notifications: workers poll
    }

    async fn subscribe(
        &self,
        _consumer: &ConsumerName,
        _wake: Arc<Notify>,
    ) -> Result<Option<Subscription>, StoreError> {
        // No notifications in SQLite: other processes' workers poll.
        Ok(None)
    }

    fn local_wakers(&self) -> Option<&LocalWakers> {
        Some(&self.wakers)
    }

    async fn purge_done(&self, older_than: SystemTime, limit: u32) -> Result<u64, StoreError> {
        let done = self
            .query(&self.queries.purge_done)
            .bind(millis(older_than))
            .bind(i64::from(limit))
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(done.rows_affected())
    }
}
