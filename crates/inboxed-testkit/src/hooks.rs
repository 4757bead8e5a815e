//! A store with seams: code a check (or a test) runs at fixed points of an inbox transaction,
//! before it begins, before and after the claim, and before its COMMIT. Everything else is
//! the wrapped store's, so the engine's own SQL runs as it would without the wrapper.
//!
//! [`Hooked`] parks a task at a barrier before `begin` or the claim, so that several deliveries
//! reach the critical statement together.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Barrier;

use inboxed_core::driver::Driver;
use inboxed_core::store::{BeginParams, Claim, ClaimParams, DurabilityReport, KeyParams};
use inboxed_core::{ConsumerName, Envelope, Store, StoreError};

/// What a [`Seamed`] store runs at each seam. Every method does nothing by default.
pub trait Seams<DB: Driver>: Send + Sync + 'static {
    /// Before the transaction begins.
    fn before_begin(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Inside the transaction, just before the claim.
    fn before_claim(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Inside the transaction, on its connection, once the claim succeeded; an `Err` is what
    /// the claim then fails with.
    fn after_claim(
        &self,
        conn: &mut DB::Connection,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = conn;
        async { Ok(()) }
    }

    /// Inside the transaction, on its connection, after its last statement (the attempt
    /// counter's clearing) and before its COMMIT; an `Err` is what that statement then fails
    /// with.
    fn before_commit(
        &self,
        conn: &mut DB::Connection,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = conn;
        async { Ok(()) }
    }
}

/// `S` with the seams `K`.
pub struct Seamed<S, K> {
    inner: S,
    seams: Arc<K>,
}

impl<S: Clone, K> Clone for Seamed<S, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            seams: Arc::clone(&self.seams),
        }
    }
}

impl<S: fmt::Debug, K> fmt::Debug for Seamed<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Seamed")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, K> Seamed<S, K> {
    /// Wraps `inner`; `seams` may be shared with whatever else reads or arms it.
    pub fn wrap(inner: S, seams: Arc<K>) -> Self {
        Self { inner, seams }
    }
}

/// Where a [`Hooked`] store's barrier sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPoint {
    /// Before the transaction begins (SQLite: writers serialize at `BEGIN IMMEDIATE`).
    BeforeBegin,
    /// Inside the transaction, just before the claim insert.
    BeforeClaim,
}

/// A one-shot barrier at a [`HookPoint`].
#[derive(Debug)]
pub struct AtBarrier {
    barrier: Arc<Barrier>,
    point: HookPoint,
    armed: AtomicBool,
}

impl AtBarrier {
    async fn wait(&self, here: HookPoint) {
        if here == self.point && self.armed.swap(false, Ordering::SeqCst) {
            self.barrier.wait().await;
        }
    }
}

impl<DB: Driver> Seams<DB> for AtBarrier {
    async fn before_begin(&self) {
        self.wait(HookPoint::BeforeBegin).await;
    }

    async fn before_claim(&self) {
        self.wait(HookPoint::BeforeClaim).await;
    }
}

/// `S` with a one-shot barrier at a [`HookPoint`].
pub type Hooked<S> = Seamed<S, AtBarrier>;

impl<S> Seamed<S, AtBarrier> {
    /// Wraps `inner`; the first `begin` or claim (per `point`) of it and its clones waits at
    /// `barrier`.
    pub fn new(inner: S, barrier: Arc<Barrier>, point: HookPoint) -> Self {
        Self::wrap(
            inner,
            Arc::new(AtBarrier {
                barrier,
                point,
                armed: AtomicBool::new(true),
            }),
        )
    }
}

/// The engine's own operations forwarded, the seams around begin, claim and the last statement
/// before the commit; the shared operations are the [`Store`] defaults, over the wrapped
/// engine.
impl<S: Store, K: Seams<S::Db>> Store for Seamed<S, K> {
    type Db = S::Db;
    type Engine = S::Engine;

    fn engine(&self) -> &S::Engine {
        self.inner.engine()
    }

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
    ) -> Result<<S::Db as Driver>::Transaction, StoreError> {
        self.seams.before_begin().await;
        self.inner.begin(params).await
    }

    async fn begin_claims(
        &self,
        params: &BeginParams,
        consumer: &ConsumerName,
        ids: &[&str],
    ) -> Result<<S::Db as Driver>::Transaction, StoreError> {
        self.seams.before_begin().await;
        self.inner.begin_claims(params, consumer, ids).await
    }

    async fn claim(
        &self,
        conn: &mut <S::Db as Driver>::Connection,
        params: &ClaimParams<'_>,
    ) -> Result<Claim, StoreError> {
        self.seams.before_claim().await;
        let claim = self.inner.claim(conn, params).await?;
        self.seams.after_claim(conn).await?;
        Ok(claim)
    }

    async fn claim_many(
        &self,
        conn: &mut <S::Db as Driver>::Connection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> Result<Vec<Claim>, StoreError> {
        self.inner.claim_many(conn, consumer, envelopes).await
    }

    async fn clear_attempts(
        &self,
        conn: &mut <S::Db as Driver>::Connection,
        params: &KeyParams<'_>,
    ) -> Result<(), StoreError> {
        self.inner.clear_attempts(conn, params).await?;
        self.seams.before_commit(conn).await
    }
}
