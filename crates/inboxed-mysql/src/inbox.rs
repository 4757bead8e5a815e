//! [`InboxStore`] for MySQL: what differs from the shared layer's defaults. No notifications
//! (workers poll; a process's own workers wake each other), no worker registry yet (a dead
//! worker's rows return with their lease), and no lock-held claim yet.

use std::sync::Arc;

use tokio::sync::Notify;

use sqlx::MySqlConnection;

use inboxed_core::engine::Args;
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    InboxRow, InboxStore, LockBatchParams, ReleaseStaleParams, RowFate, Subscription, millis,
};
use inboxed_core::{ConsumerName, StoreError};

use crate::MySqlStore;

/// The lock-held claim holds its rows' locks through the handler's transaction; its
/// statements are not written for this engine yet.
const LOCK_HELD_NOT_YET: StoreError = StoreError::Unsupported {
    operation: "ClaimMode::LockHeld on MySQL",
    reason: "not built yet on this engine; use ClaimMode::Lease",
};

impl InboxStore for MySqlStore {
    async fn lock_batch(
        &self,
        _conn: &mut MySqlConnection,
        _p: &LockBatchParams<'_>,
    ) -> Result<Vec<InboxRow>, StoreError> {
        Err(LOCK_HELD_NOT_YET)
    }

    async fn count_attempts(
        &self,
        _consumer: &ConsumerName,
        _ids: &[String],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        Err(LOCK_HELD_NOT_YET)
    }

    async fn finish_locked(
        &self,
        _conn: &mut MySqlConnection,
        _consumer: &ConsumerName,
        _fates: &[RowFate],
    ) -> Result<(), StoreError> {
        Err(LOCK_HELD_NOT_YET)
    }

    /// `release_stale.sql`: expired leases only (no worker registry on this engine yet).
    async fn release_stale(&self, p: &ReleaseStaleParams<'_>) -> Result<u64, StoreError> {
        let q = self
            .script(&self.queries.release_stale)
            .int(i64::from(p.max_attempts))
            .int(i64::from(p.limit))
            .opt_int(p.now.map(millis));
        inboxed_core::engine::Engine::execute_alone(self, q).await
    }

    async fn notify(&self, _consumer: &ConsumerName) -> Result<(), StoreError> {
        Ok(()) // no notifications: workers poll
    }

    async fn subscribe(
        &self,
        _consumer: &ConsumerName,
        _wake: Arc<Notify>,
    ) -> Result<Option<Subscription>, StoreError> {
        // No notifications on MySQL: other processes' workers poll.
        Ok(None)
    }

    fn local_wakers(&self) -> Option<&LocalWakers> {
        Some(&self.wakers)
    }
}
