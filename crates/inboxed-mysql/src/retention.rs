//! Retention on MySQL, as the shared layer has it, but for partitioned mode: expired partitions
//! are dropped whole (partitions.rs), and the keys whose ids have no time, which no drop
//! reaches, are purged row by row (purge_untimed.sql).

use std::time::{Duration, SystemTime};

use inboxed_core::engine;
use inboxed_core::retention::PartitionReport;
use inboxed_core::retention::store::{PurgeParams, RetentionStore};
use inboxed_core::{ConsumerName, StoreError};

use crate::MySqlStore;

impl RetentionStore for MySqlStore {
    fn partitioned(&self) -> bool {
        self.partitions.is_some()
    }

    fn purges_untimed_keys(&self) -> bool {
        self.partitions.is_some()
    }

    async fn purge_processed(&self, params: &PurgeParams<'_>) -> Result<u64, StoreError> {
        let sql = if self.partitions.is_some() {
            &self.queries.purge_untimed
        } else {
            &self.queries.purge_processed
        };
        engine::retention::purge_rows(self, sql, params).await
    }

    async fn maintain_partitions(
        &self,
        now: SystemTime,
        windows: &[(ConsumerName, Duration)],
    ) -> Result<PartitionReport, StoreError> {
        match self.partitions {
            Some(config) => crate::partitions::maintain(self, config, now, windows).await,
            None => Err(StoreError::Unsupported {
                operation: "time partitions",
                reason: "this store keeps keys in one table (build it with \
                         MySqlStore::partitioned)",
            }),
        }
    }
}
