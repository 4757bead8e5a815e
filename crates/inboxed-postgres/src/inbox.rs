//! [`InboxStore`] for PostgreSQL: what differs from the shared layer's defaults. A set-based
//! receipt, the lock-held mode's attempt counter and settlement, the reaper's view of dead
//! workers (the registry), and NOTIFY/LISTEN wake-ups.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgRow};
use sqlx::{PgConnection, Row};
use tokio::sync::Notify;

use inboxed_core::engine;
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::{
    EnqueueManyParams, Enqueued, InboxStore, Liveness, ReleaseStaleParams, RowFate, Subscription,
    millis, millis_of, receipt_outcomes,
};
use inboxed_core::{ConsumerName, Envelope, PayloadHash, StoreError};

use crate::PgStore;

pub(crate) type Query = sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>;

impl PgStore {
    /// The NOTIFY channel of this namespace's inbox; the payload names the consumer.
    fn channel(&self) -> String {
        format!("{}inbox", self.namespace().prefix())
    }

    /// Listens on `channel` from a connection of its own and wakes one of `wake`'s waiters
    /// for each notification whose payload `wanted` accepts, until the subscription is
    /// dropped or every holder of `wake` is gone. A lost connection is re-established at the
    /// next receive; the waiters poll meanwhile.
    pub(crate) async fn listen(
        &self,
        channel: &str,
        wake: Arc<Notify>,
        wanted: impl Fn(&str) -> bool + Send + 'static,
        what: &'static str,
    ) -> Result<Subscription, StoreError> {
        let mut listener = PgListener::connect_with(&self.pool)
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

    /// Runs an autocommitted statement. With the statement cache off (behind a proxy that does
    /// not track prepared statements) it runs inside a transaction, so that the unnamed
    /// statement's parse and execute reach the same server.
    pub(crate) async fn autocommit(&self, query: Query) -> Result<Vec<PgRow>, StoreError> {
        if self.persistent {
            return query
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::from_sqlx);
        }
        let mut tx = self.pool.begin().await.map_err(StoreError::from_sqlx)?;
        let rows = query
            .fetch_all(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(rows)
    }

    pub(crate) async fn autocommit_count(&self, query: Query) -> Result<u64, StoreError> {
        if self.persistent {
            let done = query
                .execute(&self.pool)
                .await
                .map_err(StoreError::from_sqlx)?;
            return Ok(done.rows_affected());
        }
        let mut tx = self.pool.begin().await.map_err(StoreError::from_sqlx)?;
        let done = query
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(done.rows_affected())
    }
}

impl InboxStore for PgStore {
    async fn enqueue_many(&self, p: &EnqueueManyParams<'_>) -> Result<Vec<Enqueued>, StoreError> {
        let envs = p.envelopes;
        let ids: Vec<&str> = envs.iter().map(|e| e.id().as_str()).collect();
        let column = |f: fn(&Envelope) -> Option<&str>| envs.iter().map(f).collect::<Vec<_>>();
        let payloads: Vec<&[u8]> = envs.iter().map(Envelope::payload).collect();
        let hashes: Vec<Vec<u8>> = envs.iter().map(|e| e.hash().as_bytes().to_vec()).collect();
        let get = StoreError::from_sqlx;
        let mut tx = self.pool.begin().await.map_err(get)?;
        let rows = self
            .query(&self.queries.enqueue_many)
            .bind(p.consumer.as_str())
            .bind(&ids)
            .bind(column(Envelope::aggregate_id))
            .bind(column(Envelope::message_type))
            .bind(column(Envelope::correlation_id))
            .bind(&payloads)
            .bind(&hashes)
            .bind(
                envs.iter()
                    .map(|e| e.headers().to_stored())
                    .collect::<Vec<_>>(),
            )
            .fetch_all(&mut *tx)
            .await
            .map_err(get)?;
        let mut inserted = HashMap::with_capacity(rows.len());
        for row in &rows {
            inserted.insert(
                row.try_get::<String, _>(1).map_err(get)?,
                row.try_get(0).map_err(get)?,
            );
        }
        let mut stored = HashMap::new();
        if inserted.len() < envs.len() {
            let others: Vec<&str> = ids
                .iter()
                .copied()
                .filter(|id| !inserted.contains_key(*id))
                .collect();
            let rows = self
                .query(&self.queries.enqueue_lookup_many)
                .bind(p.consumer.as_str())
                .bind(&others)
                .fetch_all(&mut *tx)
                .await
                .map_err(get)?;
            for row in &rows {
                let hash: Vec<u8> = row.try_get(1).map_err(get)?;
                if let Some(hash) = PayloadHash::from_slice(&hash) {
                    stored.insert(row.try_get::<String, _>(0).map_err(get)?, hash);
                }
            }
        }
        tx.commit().await.map_err(get)?;
        Ok(receipt_outcomes(envs, &inserted, &stored))
    }

    async fn count_attempts(
        &self,
        consumer: &ConsumerName,
        message_ids: &[String],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        // Its own transaction, without waiting for the disk flush: see count_attempts.sql.
        let mut tx = self
            .pool
            .begin_with("BEGIN; SET LOCAL synchronous_commit = off")
            .await
            .map_err(StoreError::from_sqlx)?;
        let rows = self
            .query(&self.queries.count_attempts)
            .bind(consumer.as_str())
            .bind(message_ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        rows.iter()
            .map(|r| {
                let id: String = r.try_get(0)?;
                let n: i32 = r.try_get(1)?;
                Ok((id, u32::try_from(n).unwrap_or(0)))
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from_sqlx)
    }

    async fn finish_locked(
        &self,
        conn: &mut PgConnection,
        consumer: &ConsumerName,
        fates: &[RowFate],
    ) -> Result<(), StoreError> {
        let ids: Vec<i64> = fates.iter().map(|f| f.id).collect();
        let statuses: Vec<&str> = fates.iter().map(|f| f.status).collect();
        let errors: Vec<Option<&str>> = fates.iter().map(|f| f.error.as_deref()).collect();
        let backoffs: Vec<i64> = fates.iter().map(|f| millis_of(f.backoff)).collect();
        let attempts: Vec<i32> = fates
            .iter()
            .map(|f| i32::try_from(f.attempts).unwrap_or(i32::MAX))
            .collect();
        let message_ids: Vec<&str> = fates.iter().map(|f| f.message_id.as_str()).collect();
        self.query(&self.queries.finish_locked)
            .bind(&ids)
            .bind(&statuses)
            .bind(&errors)
            .bind(&backoffs)
            .bind(&attempts)
            .bind(consumer.as_str())
            .bind(&message_ids)
            .execute(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(())
    }

    async fn release_stale(&self, p: &ReleaseStaleParams<'_>) -> Result<u64, StoreError> {
        let query = self
            .replanned(&self.queries.release_stale)
            .bind(i32::try_from(p.max_attempts).unwrap_or(i32::MAX))
            .bind(i64::from(p.limit))
            .bind(p.now.map(millis))
            .bind(p.dead_workers.to_vec());
        self.autocommit_count(query).await
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
        let query = self
            .query(&self.queries.notify)
            .bind(self.channel())
            .bind(self.wakers.payload(consumer));
        self.autocommit(query).await.map(drop)
    }

    async fn subscribe(
        &self,
        consumer: &ConsumerName,
        wake: Arc<Notify>,
    ) -> Result<Option<Subscription>, StoreError> {
        let (consumer, wakers) = (consumer.clone(), self.wakers.clone());
        // This store's own receipts woke their workers in process already.
        let foreign = move |payload: &str| wakers.is_foreign_wake(payload, &consumer);
        self.listen(&self.channel(), wake, foreign, "inbox")
            .await
            .map(Some)
    }

    fn local_wakers(&self) -> Option<&LocalWakers> {
        Some(&self.wakers)
    }
}
