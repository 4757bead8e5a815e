//! [`InboxStore`] for MySQL: store-then-process is not built on this engine yet. Its
//! operations refuse with [`StoreError::Unsupported`] until their statements are written; the
//! processor (the idempotent consumer) does not use them.

use std::sync::Arc;

use tokio::sync::Notify;

use sqlx::MySqlConnection;

use inboxed_core::inbox::store::{InboxStore, ReleaseStaleParams, RowFate, Subscription};
use inboxed_core::{ConsumerName, StoreError};

use crate::MySqlStore;

const NOT_YET: StoreError = StoreError::Unsupported {
    operation: "store-then-process on MySQL",
    reason: "not built yet on this engine; use the processor (Processor, Consumer), or \
             PostgreSQL or SQLite for Inbox and Worker",
};

impl InboxStore for MySqlStore {
    async fn count_attempts(
        &self,
        _consumer: &ConsumerName,
        _ids: &[String],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        Err(NOT_YET)
    }

    async fn finish_locked(
        &self,
        _conn: &mut MySqlConnection,
        _consumer: &ConsumerName,
        _fates: &[RowFate],
    ) -> Result<(), StoreError> {
        Err(NOT_YET)
    }

    async fn release_stale(&self, _p: &ReleaseStaleParams<'_>) -> Result<u64, StoreError> {
        Err(NOT_YET)
    }

    async fn notify(&self, _consumer: &ConsumerName) -> Result<(), StoreError> {
        Err(NOT_YET)
    }

    async fn subscribe(
        &self,
        _consumer: &ConsumerName,
        _wake: Arc<Notify>,
    ) -> Result<Option<Subscription>, StoreError> {
        Err(NOT_YET)
    }
}
