//! [`InboxStore`] on tokio-postgres: PostgreSQL's own operations ([`crate::common`]), the
//! worker registry, and `LISTEN` on a connection made for it ([`super::listen`]).

use std::sync::Arc;

use tokio::sync::Notify;

use inboxed_core::engine;
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    EnqueueManyParams, Enqueued, InboxStore, Liveness, ReleaseStaleParams, RowFate, Subscription,
};
use inboxed_core::{ConsumerName, StoreError};

use super::driver::{Connection, Transaction};
use super::store::TokioPgStore;
use crate::common::{self, PgEngine};

impl PgEngine for TokioPgStore {
    async fn begin_with(&self, statement: String) -> Result<Transaction, StoreError> {
        Self::begin_with(self, &statement).await
    }

    fn wakers(&self) -> &LocalWakers {
        &self.wakers
    }

    /// `None` for a store built over a pool without [`TokioPgStore::with_notifications`]:
    /// its workers and relays poll.
    async fn listen(
        &self,
        channel: String,
        wake: Arc<Notify>,
        wanted: impl Fn(&str) -> bool + Send + Sync + 'static,
        what: &'static str,
    ) -> Result<Option<Subscription>, StoreError> {
        match &self.listener {
            Some(listener) => listener.listen(channel, wake, wanted, what).await.map(Some),
            None => Ok(None),
        }
    }
}

impl InboxStore for TokioPgStore {
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
        conn: &mut Connection,
        consumer: &ConsumerName,
        fates: &[RowFate],
    ) -> Result<(), StoreError> {
        common::finish_locked(self, conn, consumer, fates).await
    }

    async fn release_stale(&self, p: &ReleaseStaleParams<'_>) -> Result<u64, StoreError> {
        common::release_stale(self, p).await
    }

    async fn hold_liveness(&self, worker: &str) -> Result<Option<Liveness>, StoreError> {
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
