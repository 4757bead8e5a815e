//! [`InboxStore`] for SQLite: the store-then-process operations. Times are integer
//! milliseconds; id lists travel as JSON arrays.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;

use sqlx::SqliteConnection;

use inboxed_core::engine;
use inboxed_core::engine::claims;
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    ClaimBatchParams, ClaimToken, CompleteParams, Completed, EnqueueManyParams, EnqueueParams,
    Enqueued, FailParams, Failed, InboxRow, InboxStore, LockBatchParams, ReleaseStaleParams,
    ReplayParams, Replayed, RowFate, Subscription, millis,
};
use inboxed_core::{ConsumerName, StoreError};

use crate::SqliteStore;

/// SQLite has no row locks, and its one writer would make a lock-held batch block every other
/// worker (and the attempt counter, which must commit separately) until it ends.
const LOCK_HELD_UNSUPPORTED: StoreError = StoreError::Unsupported {
    operation: "ClaimMode::LockHeld",
    reason: "SQLite has no row locks; use ClaimMode::Lease",
};

impl InboxStore for SqliteStore {
    fn max_concurrent_batches(&self) -> Option<usize> {
        // One writer: a second loop would claim rows (counting attempts, starting leases) and
        // then wait behind the first batch's write lock.
        Some(1)
    }

    async fn enqueue(&self, p: &EnqueueParams<'_>) -> Result<Enqueued, StoreError> {
        claims::enqueue(self, p).await
    }

    async fn enqueue_many(&self, p: &EnqueueManyParams<'_>) -> Result<Vec<Enqueued>, StoreError> {
        claims::enqueue_each(self, p).await
    }

    async fn claim_batch(&self, p: &ClaimBatchParams<'_>) -> Result<Vec<InboxRow>, StoreError> {
        claims::claim_batch(self, p).await
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
