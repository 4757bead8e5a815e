//! [`InboxStore`] for SQLite: the store-then-process operations. Times are integer
//! milliseconds; id lists travel as JSON arrays.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use inboxed_core::engine;
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
        engine::inbox::complete(self, conn, p).await
    }

    async fn complete_batch(
        &self,
        conn: &mut SqliteConnection,
        ids: &[i64],
        token: &ClaimToken,
    ) -> Result<Vec<i64>, StoreError> {
        engine::inbox::complete_batch(self, conn, ids, token).await
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
        engine::inbox::fail(self, p).await
    }

    async fn extend_leases(&self, token: &ClaimToken, lease: Duration) -> Result<u64, StoreError> {
        engine::inbox::extend_leases(self, token, lease).await
    }

    async fn release(&self, token: &ClaimToken, ids: Option<&[i64]>) -> Result<u64, StoreError> {
        engine::inbox::release(self, token, ids).await
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
        engine::inbox::replay(self, p).await
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
        engine::inbox::purge_done(self, older_than, limit).await
    }
}
