//! The partitions an operator sees: `inboxed partitions list`.

use std::time::{Duration, SystemTime};

use sqlx::Row;

use inboxed_core::observe::from_millis;
use inboxed_core::{ConsumerName, StoreError};

use crate::PgStore;

/// One partition of the processed keys (partitioned mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Schema-qualified, quoted name.
    pub name: String,
    /// Keys received from this time on (`None` for a detached table).
    pub from: Option<SystemTime>,
    /// … and before this one.
    pub to: Option<SystemTime>,
    /// `attached`, `pending` (a detach was cut short) or `detached` (not dropped yet).
    pub state: String,
    /// Size with indexes, in bytes.
    pub bytes: u64,
}

/// A partition an expiry pass would take up, and what it would do with it: the dry run of
/// `inboxed partitions drop-expired`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiryPlan {
    /// Schema-qualified, quoted name.
    pub name: String,
    /// Its keys were received before this time (`None` for a detached table).
    pub to: Option<SystemTime>,
    /// `attached`, `pending` or `detached`; a detach already begun is always finished.
    pub state: String,
    /// Why it would be kept, or `None` when it would be dropped.
    pub keep: Option<String>,
}

impl PgStore {
    /// What a maintenance pass with `windows` would drop and keep at `now`, without changing
    /// anything: the partitions past the shortest window and the leftovers of an interrupted
    /// pass. A partition goes only when every consumer with keys in it has a window here that
    /// has passed over it.
    ///
    /// # Errors
    /// A store failure.
    pub async fn partitions_expiry_plan(
        &self,
        now: SystemTime,
        windows: &[(ConsumerName, Duration)],
    ) -> Result<Vec<ExpiryPlan>, StoreError> {
        let mut conn = crate::partitions::connect(self).await?;
        let plan = crate::partitions::plan(self, &mut conn, now, windows).await;
        let _ = sqlx::Connection::close(conn).await;
        plan
    }

    /// The processed-keys partitions, oldest first; empty when the table is not partitioned
    /// yet.
    ///
    /// # Errors
    /// A store failure.
    pub async fn partitions_list(&self) -> Result<Vec<PartitionInfo>, StoreError> {
        let rows = self
            .query(&self.queries.list_partitions)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        let get = StoreError::from_sqlx;
        rows.iter()
            .map(|r| {
                let bytes: i64 = r.try_get("bytes").map_err(get)?;
                Ok(PartitionInfo {
                    name: r.try_get("partition").map_err(get)?,
                    from: from_millis(r.try_get("lower_ms").map_err(get)?),
                    to: from_millis(r.try_get("upper_ms").map_err(get)?),
                    state: r.try_get("state").map_err(get)?,
                    bytes: u64::try_from(bytes).unwrap_or(0),
                })
            })
            .collect()
    }
}
