//! Retention on MySQL, as the shared layer has it, but for partitioned mode: expired partitions
//! are dropped whole (partitions.rs).

use std::time::{Duration, SystemTime};

use inboxed_core::retention::PartitionReport;
use inboxed_core::retention::store::RetentionStore;
use inboxed_core::{ConsumerName, StoreError};

use crate::MySqlStore;

impl RetentionStore for MySqlStore {
    fn partitioned(&self) -> bool {
        self.partitions.is_some()
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
