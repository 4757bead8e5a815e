//! [`InboxStore`] for SQLite: what differs from the shared layer's defaults. One writer (so
//! one batch at a time), no row locks (no lock-held mode), no notifications (workers poll),
//! no worker registry (a dead worker's rows return with their lease).

use std::sync::Arc;

use tokio::sync::Notify;

use sqlx::SqliteConnection;

use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    InboxRow, InboxStore, LockBatchParams, ReleaseStaleParams, RowFate, Subscription, millis,
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
}
