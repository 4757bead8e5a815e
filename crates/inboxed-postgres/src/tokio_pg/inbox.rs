//! What tokio-postgres does its own way for the inbox ([`PgEngine`]: the `BEGIN` with its
//! settings, the wakers, `LISTEN` on a connection made for it ([`super::listen`])), and the
//! store traits every driver answers alike, stamped by [`crate::stores`].

use std::sync::Arc;

use tokio::sync::Notify;

use inboxed_core::StoreError;
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::Subscription;

use super::driver::Transaction;
use super::store::TokioPgStore;
use crate::common::PgEngine;

impl PgEngine for TokioPgStore {
    async fn begin_with(&self, statement: String) -> Result<Transaction, StoreError> {
        Self::begin_with(self, &statement).await
    }

    fn wakers(&self) -> &LocalWakers {
        &self.wakers
    }

    fn max_connections(&self) -> u32 {
        u32::try_from(self.pool.status().max_size).unwrap_or(u32::MAX)
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

crate::stores::driver_store!(TokioPgStore);
