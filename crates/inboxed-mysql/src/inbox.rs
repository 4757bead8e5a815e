//! [`InboxStore`] for MySQL: what differs from the shared layer's defaults. A batch receipt in
//! few statements; no notifications
//! (workers poll; a process's own workers wake each other), workers' liveness through named
//! locks (`GET_LOCK`), and the lock-held batch's counts and settlement passed as JSON (MySQL
//! has no arrays).

use std::sync::Arc;

use tokio::sync::Notify;

use sqlx::MySqlConnection;

use inboxed_core::engine::{self, Args, Columns, Engine};
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    ClaimToken, CompleteParams, Completed, EnqueueManyParams, Enqueued, Gate, InboxStore, Liveness,
    ReleaseStaleParams, RowFate, Subscription, millis, millis_of,
};
use inboxed_core::{ConsumerName, StoreError};

use crate::MySqlStore;

impl InboxStore for MySqlStore {
    /// `enqueue_many.sql`: the batch's aggregates' turns at once, then one insert a part of the
    /// batch (receipt.rs).
    async fn enqueue_many(&self, p: &EnqueueManyParams<'_>) -> Result<Vec<Enqueued>, StoreError> {
        self.enqueue_batch(p).await
    }

    /// `record_attempts.sql`, the processor's batch count: one more claim of each row, in a
    /// transaction of its own on another connection, before any handler runs. The attempts
    /// table, not the inbox row, which the worker's own transaction holds locked.
    async fn count_attempts(
        &self,
        consumer: &ConsumerName,
        ids: &[String],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let q = self
            .script(&self.queries.record_attempts)
            .text(consumer.as_str())
            .texts(&ids);
        Engine::fetch_alone(self, q)
            .await?
            .iter()
            .map(|row| Ok((row.text(0)?, row.count(1)?)))
            .collect()
    }

    /// `finish_locked.sql`, the fates as one JSON array.
    async fn finish_locked(
        &self,
        conn: &mut MySqlConnection,
        consumer: &ConsumerName,
        fates: &[RowFate],
    ) -> Result<(), StoreError> {
        let rows: Vec<serde_json::Value> = fates
            .iter()
            .map(|f| {
                serde_json::json!({
                    "id": f.id,
                    "status": f.status,
                    "error": f.error,
                    "backoff": millis_of(f.backoff),
                    "attempts": f.attempts,
                })
            })
            .collect();
        let ids: Vec<&str> = fates.iter().map(|f| f.message_id.as_str()).collect();
        let q = self
            .script(&self.queries.finish_locked)
            .text(&serde_json::Value::from(rows).to_string())
            .text(consumer.as_str())
            .texts(&ids);
        <Self as Engine>::execute(q, conn).await.map(drop)
    }

    async fn release_stale(&self, p: &ReleaseStaleParams<'_>) -> Result<u64, StoreError> {
        let dead: Vec<&str> = p.dead_workers.iter().map(String::as_str).collect();
        let q = self
            .script(&self.queries.release_stale)
            .int(i64::from(p.max_attempts))
            .int(i64::from(p.limit))
            .opt_int(p.now.map(millis))
            .texts(&dead);
        self.execute_alone(q).await
    }

    /// The savepoint's check first (complete.sql): a lost savepoint is the transaction ended.
    async fn complete(
        &self,
        conn: &mut MySqlConnection,
        params: &CompleteParams<'_>,
    ) -> Result<Completed, StoreError> {
        engine::inbox::complete(self, conn, params)
            .await
            .map_err(inboxed_core::engine::keys::ended)
    }

    async fn complete_batch(
        &self,
        conn: &mut MySqlConnection,
        ids: &[i64],
        token: &ClaimToken,
    ) -> Result<Vec<i64>, StoreError> {
        engine::inbox::complete_batch(self, conn, ids, token)
            .await
            .map_err(inboxed_core::engine::keys::ended)
    }

    /// A named lock (`GET_LOCK`) on a connection of its own.
    async fn hold_liveness(&self, worker: &str) -> Result<Option<Liveness>, StoreError> {
        engine::liveness::hold(self, worker).await
    }

    /// Named locks, each waited on by the loops that need it: on MariaDB 10.11, 16 default
    /// workers drained at 0.50 to 0.77 of one worker's rate without a gate.
    fn batch_gate(&self, slots: u32) -> Option<Gate> {
        Some(crate::gate::open(self, slots))
    }

    async fn dead_workers(&self) -> Result<Vec<String>, StoreError> {
        engine::liveness::dead_workers(self).await
    }

    async fn forget_workers(&self, workers: &[String]) -> Result<u64, StoreError> {
        engine::liveness::forget_workers(self, workers).await
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
