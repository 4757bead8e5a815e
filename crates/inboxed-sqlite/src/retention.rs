//! [`RetentionStore`] for SQLite: the bounded purge of processed keys and their figures.
//! SQLite has no statement timeout; the batch size bounds each delete, and the busy timeout
//! (from `lock_timeout`) bounds the wait for the write lock.

use std::time::SystemTime;

use inboxed_core::engine;
use inboxed_core::retention::store::{BatchParams, ProcessedStats, PurgeParams, RetentionStore};
use inboxed_core::{ConsumerName, StoreError};

use crate::SqliteStore;

impl RetentionStore for SqliteStore {
    async fn purge_processed(&self, params: &PurgeParams<'_>) -> Result<u64, StoreError> {
        engine::retention::purge_processed(self, params).await
    }

    async fn purge_dead_letters(&self, params: &BatchParams) -> Result<u64, StoreError> {
        engine::retention::batch(self, &self.queries.purge_dead_letters, params).await
    }

    async fn purge_redrive_audit(&self, params: &BatchParams) -> Result<u64, StoreError> {
        engine::retention::batch(self, &self.queries.purge_redrive_audit, params).await
    }

    async fn redact_done_payloads(&self, params: &BatchParams) -> Result<u64, StoreError> {
        engine::retention::batch(self, &self.queries.redact_done_payloads, params).await
    }

    async fn count_expired(
        &self,
        consumer: &ConsumerName,
        older_than: SystemTime,
        cap: u64,
    ) -> Result<u64, StoreError> {
        engine::retention::count_expired(self, consumer, older_than, cap).await
    }

    async fn processed_stats(&self, consumer: &ConsumerName) -> Result<ProcessedStats, StoreError> {
        engine::retention::processed_stats(self, consumer).await
    }
}
