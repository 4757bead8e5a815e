//! [`InboxStore`] for PostgreSQL through sqlx: PostgreSQL's own operations
//! ([`crate::common`]), the reaper's view of dead workers (the registry), and the listener.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgRow};
use sqlx::{AssertSqlSafe, PgConnection};
use tokio::sync::Notify;

use inboxed_core::engine;
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    EnqueueManyParams, Enqueued, InboxStore, Liveness, ReleaseStaleParams, RowFate, Subscription,
};
use inboxed_core::{ConsumerName, StoreError};

use crate::PgStore;
use crate::common;
use crate::engine::PgQuery;

/// Listens on `channel` from a connection of `pool`'s own and wakes one of `wake`'s waiters
/// for each notification whose payload `wanted` accepts, until the subscription is dropped or
/// every holder of `wake` is gone. A lost connection is re-established at the next receive;
/// the waiters poll meanwhile.
pub(crate) async fn listen_on(
    pool: &sqlx::PgPool,
    channel: &str,
    wake: Arc<Notify>,
    wanted: impl Fn(&str) -> bool + Send + 'static,
    what: &'static str,
) -> Result<Subscription, StoreError> {
    let mut listener = PgListener::connect_with(pool)
        .await
        .map_err(StoreError::from_sqlx)?;
    listener
        .listen(channel)
        .await
        .map_err(StoreError::from_sqlx)?;
    let weak = Arc::downgrade(&wake);
    drop(wake);
    let task = tokio::spawn(async move {
        loop {
            match listener.recv().await {
                Ok(note) if wanted(note.payload()) => match weak.upgrade() {
                    Some(notify) => notify.notify_one(),
                    None => return,
                },
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, listener = what, "listener lost its connection");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    });
    Ok(Subscription::new(task))
}

impl PgStore {
    /// Runs an autocommitted statement. With the statement cache off (behind a proxy that does
    /// not track prepared statements) a prepared one runs inside a transaction, so that the
    /// unnamed statement's parse and execute reach the same server; a statement sent as text
    /// is one message, and a transaction of its own.
    pub(crate) async fn autocommit(&self, query: PgQuery) -> Result<Vec<PgRow>, StoreError> {
        if self.persistent || query.is_inline() {
            return query.fetch_all(&self.pool).await;
        }
        let mut tx = self.pool.begin().await.map_err(StoreError::from_sqlx)?;
        let rows = query.fetch_all(&mut *tx).await?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(rows)
    }

    /// [`PgStore::autocommit`]: the rows the statement changed.
    pub(crate) async fn autocommit_count(&self, query: PgQuery) -> Result<u64, StoreError> {
        if self.persistent || query.is_inline() {
            return query.execute(&self.pool).await;
        }
        let mut tx = self.pool.begin().await.map_err(StoreError::from_sqlx)?;
        let done = query.execute(&mut *tx).await?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(done)
    }
}

impl crate::common::PgEngine for PgStore {
    async fn begin_with(
        &self,
        statement: String,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
        self.pool
            .begin_with(AssertSqlSafe(statement))
            .await
            .map_err(StoreError::from_sqlx)
    }

    fn wakers(&self) -> &LocalWakers {
        &self.wakers
    }

    fn max_connections(&self) -> u32 {
        self.pool.options().get_max_connections()
    }

    async fn listen(
        &self,
        channel: String,
        wake: Arc<Notify>,
        wanted: impl Fn(&str) -> bool + Send + Sync + 'static,
        what: &'static str,
    ) -> Result<Option<Subscription>, StoreError> {
        listen_on(&self.pool, &channel, wake, wanted, what)
            .await
            .map(Some)
    }
}

impl InboxStore for PgStore {
    async fn enqueue_many(&self, p: &EnqueueManyParams<'_>) -> Result<Vec<Enqueued>, StoreError> {
        common::enqueue_many(self, p).await
    }

    async fn count_attempts(
        &self,
        consumer: &ConsumerName,
        message_ids: &[String],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        common::count_attempts(self, consumer, message_ids).await
    }

    async fn finish_locked(
        &self,
        conn: &mut PgConnection,
        consumer: &ConsumerName,
        fates: &[RowFate],
    ) -> Result<(), StoreError> {
        common::finish_locked(self, conn, consumer, fates).await
    }

    async fn release_stale(&self, p: &ReleaseStaleParams<'_>) -> Result<u64, StoreError> {
        common::release_stale(self, p).await
    }

    /// `None` behind a transaction-pooling proxy (statements not persistent): a session lock
    /// there would belong to a server connection the proxy shares.
    async fn hold_liveness(&self, worker: &str) -> Result<Option<Liveness>, StoreError> {
        if !self.persistent {
            return Ok(None);
        }
        engine::liveness::hold(self, worker).await
    }

    async fn dead_workers(&self) -> Result<Vec<String>, StoreError> {
        engine::liveness::dead_workers(self).await
    }

    async fn forget_workers(&self, workers: &[String]) -> Result<u64, StoreError> {
        engine::liveness::forget_workers(self, workers).await
    }

    async fn notify(&self, consumer: &ConsumerName) -> Result<(), StoreError> {
        common::notify(self, consumer).await
    }

    async fn subscribe(
        &self,
        consumer: &ConsumerName,
        wake: Arc<Notify>,
    ) -> Result<Option<Subscription>, StoreError> {
        common::subscribe(self, consumer, wake).await
    }

    fn local_wakers(&self) -> Option<&LocalWakers> {
        Some(&self.wakers)
    }
}
