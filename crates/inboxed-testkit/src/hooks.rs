//! A store wrapper that parks a task at a barrier just before `begin` or `claim`, so two
//! deliveries reach the critical statement together. Everything else is delegated.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Barrier;

use inboxed_core::store::{
    BeginParams, Claim, ClaimParams, DeadLetter, DeadLetterParams, DeadLettered, DurabilityReport,
    KeyParams,
};
use inboxed_core::{ConsumerName, Envelope, MessageId, Store, StoreError};

/// Where the barrier sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPoint {
    /// Before the transaction begins (SQLite: writers serialize at `BEGIN IMMEDIATE`).
    BeforeBegin,
    /// Inside the transaction, just before the claim insert.
    BeforeClaim,
}

/// `S` with a one-shot barrier at `point`.
#[derive(Debug, Clone)]
pub struct Hooked<S> {
    inner: S,
    barrier: Arc<Barrier>,
    point: HookPoint,
    armed: Arc<AtomicBool>,
}

impl<S> Hooked<S> {
    /// Wraps `inner`; the first `begin` or `claim` (per `point`) waits at `barrier`.
    pub fn new(inner: S, barrier: Arc<Barrier>, point: HookPoint) -> Self {
        Self {
            inner,
            barrier,
            point,
            armed: Arc::new(AtomicBool::new(true)),
        }
    }

    async fn wait(&self, here: HookPoint) {
        if here == self.point && self.armed.swap(false, Ordering::SeqCst) {
            self.barrier.wait().await;
        }
    }
}

impl<S: Store> Store for Hooked<S> {
    type Db = S::Db;

    async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        self.inner.migrate().await
    }

    async fn check_durability(&self) -> Result<DurabilityReport, StoreError> {
        self.inner.check_durability().await
    }

    async fn register_consumer(&self, consumer: &ConsumerName) -> Result<(), StoreError> {
        self.inner.register_consumer(consumer).await
    }

    async fn begin(
        &self,
        params: &BeginParams,
    ) -> Result<sqlx::Transaction<'static, S::Db>, StoreError> {
        self.wait(HookPoint::BeforeBegin).await;
        self.inner.begin(params).await
    }

    async fn claim(
        &self,
        conn: &mut <S::Db as sqlx::Database>::Connection,
        params: &ClaimParams<'_>,
    ) -> Result<Claim, StoreError> {
        self.wait(HookPoint::BeforeClaim).await;
        self.inner.claim(conn, params).await
    }

    async fn record_attempt(&self, params: &KeyParams<'_>) -> Result<u32, StoreError> {
        self.inner.record_attempt(params).await
    }

    async fn record_attempts(
        &self,
        consumer: &ConsumerName,
        ids: &[&MessageId],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        self.inner.record_attempts(consumer, ids).await
    }

    async fn load_attempts(
        &self,
        consumer: &ConsumerName,
        ids: &[&MessageId],
    ) -> Result<Vec<(String, u32)>, StoreError> {
        self.inner.load_attempts(consumer, ids).await
    }

    async fn clear_attempts(
        &self,
        conn: &mut <S::Db as sqlx::Database>::Connection,
        params: &KeyParams<'_>,
    ) -> Result<(), StoreError> {
        self.inner.clear_attempts(conn, params).await
    }

    async fn claim_many(
        &self,
        conn: &mut <S::Db as sqlx::Database>::Connection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> Result<Vec<Claim>, StoreError> {
        self.inner.claim_many(conn, consumer, envelopes).await
    }

    async fn clear_many_attempts(
        &self,
        conn: &mut <S::Db as sqlx::Database>::Connection,
        consumer: &ConsumerName,
        ids: &[&MessageId],
    ) -> Result<(), StoreError> {
        self.inner.clear_many_attempts(conn, consumer, ids).await
    }

    async fn load_dead_letter(
        &self,
        params: &KeyParams<'_>,
    ) -> Result<Option<DeadLetter>, StoreError> {
        self.inner.load_dead_letter(params).await
    }

    async fn delete_dead_letter(
        &self,
        conn: &mut <S::Db as sqlx::Database>::Connection,
        params: &KeyParams<'_>,
    ) -> Result<bool, StoreError> {
        self.inner.delete_dead_letter(conn, params).await
    }

    async fn dead_letter(&self, params: &DeadLetterParams<'_>) -> Result<DeadLettered, StoreError> {
        self.inner.dead_letter(params).await
    }
}
