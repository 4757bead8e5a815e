//! The store on tokio-postgres; `Store` is stamped by [`crate::stores`], with the claim sent
//! behind the `BEGIN` and the settling statement behind the `COMMIT`, each pair in one round
//! trip.

use std::sync::Arc;

use futures_util::future::join;

use inboxed_core::engine::{claims, keys};
use inboxed_core::sql::Queries;
use inboxed_core::store::{BeginParams, Claim, ClaimParams, KeyParams};
use inboxed_core::{Namespace, Store, StoreError};

use tokio_postgres::Socket;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};

use super::driver::{Connection, TokioPostgres, Transaction};
use super::listen::Listener;
use crate::key_lock;
use crate::queries::TEMPLATES;
use crate::store::begin_statement;

/// The inbox on PostgreSQL through tokio-postgres, over the application's deadpool-postgres
/// pool, so that handlers write through the same connection in the same transaction as the
/// claim. Handlers implement `Handler<TokioPostgres>` and receive a
/// [`Connection`](super::Connection).
///
/// It serves what [`PgStore`](crate::PgStore) serves, on the same tables: the processor, the
/// store-then-process workers, the outbox and its relays, retention and the operator's reads
/// and commands; time-partitioned keys are `PgStore`'s alone.
#[derive(Clone)]
pub struct TokioPgStore {
    pub(crate) pool: deadpool_postgres::Pool,
    pub(crate) ns: Namespace,
    pub(crate) queries: Arc<Queries>,
    /// Idle workers of this process, woken by receipts through any clone of this store.
    pub(crate) wakers: inboxed_core::inbox::LocalWakers,
    /// How to make a connection for `LISTEN`; without one, workers and relays poll.
    pub(crate) listener: Option<Listener>,
}

impl std::fmt::Debug for TokioPgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokioPgStore")
            .field("ns", &self.ns)
            .finish_non_exhaustive()
    }
}

impl TokioPgStore {
    /// A store in schema `public` with tables prefixed `inboxed_`, over `pool`.
    #[must_use]
    pub fn new(pool: deadpool_postgres::Pool) -> Self {
        Self::with_namespace(pool, crate::default_namespace())
    }

    /// A store in a chosen schema and prefix (see [`Namespace::new`]).
    #[must_use]
    pub fn with_namespace(pool: deadpool_postgres::Pool, ns: Namespace) -> Self {
        Self {
            pool,
            queries: Arc::new(Queries::render(&TEMPLATES, &ns)),
            ns,
            wakers: inboxed_core::inbox::LocalWakers::default(),
            listener: None,
        }
    }

    /// Wakes idle workers and relays of other processes at once when rows arrive, through
    /// `LISTEN` on a connection of its own made with `config` and `tls` (those of the pool:
    /// deadpool-postgres does not hand them back, and drops the notifications of the
    /// connections it pools). Without it they find new rows at their next poll.
    /// [`TokioPgStore::connect`] sets it.
    #[must_use]
    pub fn with_notifications<T>(mut self, config: tokio_postgres::Config, tls: T) -> Self
    where
        T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
        T::Stream: Send + 'static,
        T::TlsConnect: Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        self.listener = Some(Listener::new(config, tls));
        self
    }

    /// A pool of up to `max_connections` (10 when 0) to `url`, without TLS, and a store over
    /// it. With TLS, build the pool with your connector and use [`TokioPgStore::new`].
    ///
    /// # Errors
    /// A malformed URL.
    pub fn connect(url: &str, max_connections: usize) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Database(sqlx::Error::Configuration(Box::new(e))))?;
        let manager = deadpool_postgres::Manager::new(config.clone(), tokio_postgres::NoTls);
        let size = if max_connections == 0 {
            10
        } else {
            max_connections
        };
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(size)
            .build()
            .map_err(|e| StoreError::Database(sqlx::Error::Configuration(Box::new(e))))?;
        Ok(Self::new(pool).with_notifications(config, tokio_postgres::NoTls))
    }

    /// The pool.
    #[must_use]
    pub fn pool(&self) -> &deadpool_postgres::Pool {
        &self.pool
    }

    /// Creates or updates the inbox's tables, as [`PgStore::migrate`](crate::PgStore::migrate)
    /// does (the same migrations, recorded in the same table).
    ///
    /// # Errors
    /// [`StoreError`] when the database is unreachable or refuses a migration.
    pub async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        <Self as Store>::migrate(self).await
    }

    /// A transaction on a connection of the pool (`BEGIN`, the server's default isolation),
    /// for writing to the outbox beside a business change outside a handler:
    /// [`Outbox::write`](inboxed_core::outbox::Outbox::write) takes its connection. Dropped
    /// without [`Transaction::commit`], it rolls back.
    ///
    /// # Errors
    /// No connection could be had, or the server refused.
    pub async fn transaction(&self) -> Result<Transaction, StoreError> {
        self.begin_with("BEGIN").await
    }

    /// A connection of the pool.
    pub(crate) async fn connection(&self) -> Result<Connection, StoreError> {
        self.pool
            .get()
            .await
            .map(Connection::pooled)
            .map_err(pool_error)
    }

    /// A connection taken out of the pool for good.
    pub(crate) async fn own_connection(&self) -> Result<Connection, StoreError> {
        self.pool
            .get()
            .await
            .map(Connection::own)
            .map_err(pool_error)
    }

    /// A transaction begun with `statement`. The connection is the transaction's before the
    /// statement is sent, so that a caller who gives up half-way leaves no pooled connection
    /// inside a transaction (the connection is closed instead).
    pub(crate) async fn begin_with(&self, statement: &str) -> Result<Transaction, StoreError> {
        let tx = Transaction::begun(self.connection().await?);
        match tx.client().batch_execute(statement).await {
            Ok(()) => Ok(tx),
            Err(e) => Err(StoreError::from_tokio_postgres(e)),
        }
    }
}

/// A pool's failure: the server's own error classified, anything else (a wait for a free
/// connection that timed out, a closed pool) the database being unavailable.
fn pool_error(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => StoreError::from_tokio_postgres(e),
        other => StoreError::Unavailable(sqlx::Error::Io(std::io::Error::other(other))),
    }
}

crate::stores::driver_store_base!(TokioPgStore, TokioPostgres, {
    /// `BEGIN` (with the key's lock) and the claim sent together: one round trip. Should the
    /// `BEGIN`'s statements fail (the key lock's timeout), the transaction is aborted and the
    /// claim fails inside it; it never runs on its own.
    async fn begin_and_claim(
        &self,
        begin: &BeginParams,
        params: &ClaimParams<'_>,
    ) -> Result<(Transaction, Claim), StoreError> {
        let id = params.envelope.id().as_str();
        let locks = key_lock::claim_locks(params.consumer, &[id]);
        let statement = begin_statement(begin, &locks);
        let claim =
            claims::claim_query(self, &self.queries.claim, params.consumer, params.envelope);
        let mut tx = Transaction::begun(self.connection().await?);
        let (begun, inserted) = join(
            tx.client().batch_execute(&statement),
            claim.changed(tx.client()),
        )
        .await;
        let inserted = match (begun.map_err(StoreError::from_tokio_postgres), inserted) {
            (Ok(()), Ok(n)) => n,
            (Err(e), _) | (Ok(()), Err(e)) => {
                let _ = inboxed_core::driver::Transaction::rollback(tx).await;
                return Err(e);
            }
        };
        let claim = if inserted == 1 {
            Claim::New
        } else {
            claims::not_claimed(self, &mut tx, params.consumer, id).await?
        };
        Ok((tx, claim))
    }

    /// The settling statement and `COMMIT` sent together: one round trip.
    async fn settle_and_commit(
        &self,
        tx: Transaction,
        params: &KeyParams<'_>,
    ) -> Result<(), StoreError> {
        tx.commit_after(keys::clear_attempts_query(self, params))
            .await
    }
});
