//! The store on diesel-async: its pool, its transactions, and `LISTEN` on a connection taken
//! out of the pool for it; `Store` and `InboxStore` are stamped by [`crate::stores`] from
//! PostgreSQL's own operations as every driver runs them (`common.rs`).

use std::sync::Arc;
use std::time::Duration;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool::{Pool, PoolError};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use futures_util::StreamExt;
use tokio::sync::Notify;

use inboxed_core::engine::Engine;
use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::Subscription;
use inboxed_core::sql::Queries;
use inboxed_core::{Namespace, Store, StoreError};

use super::driver::{Connection, DieselPostgres, Transaction};
use crate::common::PgEngine;
use crate::queries::TEMPLATES;

/// The inbox on PostgreSQL through diesel-async, over the application's pool, so that handlers
/// write through the same connection in the same transaction as the claim. Handlers implement
/// `Handler<DieselPostgres>` and receive a [`Connection`](super::Connection), which
/// dereferences to diesel's `AsyncPgConnection`.
///
/// It serves what [`PgStore`](crate::PgStore) serves, on the same tables, except
/// time-partitioned keys.
#[derive(Clone)]
pub struct DieselPgStore {
    pub(crate) pool: Pool<AsyncPgConnection>,
    pub(crate) ns: Namespace,
    pub(crate) queries: Arc<Queries>,
    /// Idle workers of this process, woken by receipts through any clone of this store.
    wakers: LocalWakers,
}

impl std::fmt::Debug for DieselPgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DieselPgStore")
            .field("ns", &self.ns)
            .finish_non_exhaustive()
    }
}

impl DieselPgStore {
    /// A store in schema `public` with tables prefixed `inboxed_`, over `pool`.
    #[must_use]
    pub fn new(pool: Pool<AsyncPgConnection>) -> Self {
        Self::with_namespace(pool, crate::default_namespace())
    }

    /// A store in a chosen schema and prefix (see [`Namespace::new`]).
    #[must_use]
    pub fn with_namespace(pool: Pool<AsyncPgConnection>, ns: Namespace) -> Self {
        Self {
            pool,
            queries: Arc::new(Queries::render(&TEMPLATES, &ns)),
            ns,
            wakers: LocalWakers::default(),
        }
    }

    /// A pool of up to `max_connections` (10 when 0) to `url`, as diesel-async connects
    /// (without TLS), and a store over it. A connection the pool hands out again is not
    /// checked with a query (diesel-async's `RecyclingMethod::Fast`, not its default
    /// `Verified`): the check is a round trip more for every transaction, 7 instead of 6 for a
    /// message whose handler runs one `sql_query` (`inboxed-bench processor --latency-ms 1`),
    /// and a connection that broke fails its transaction's first statement anyway, a transient
    /// failure that is tried again. A pool of your own may check as it likes.
    ///
    /// # Errors
    /// The pool could not be built.
    pub fn connect(url: &str, max_connections: usize) -> Result<Self, StoreError> {
        let mut config = ManagerConfig::default();
        config.recycling_method = RecyclingMethod::Fast;
        let manager =
            AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, config);
        let size = if max_connections == 0 {
            10
        } else {
            max_connections
        };
        let pool = Pool::builder(manager)
            .max_size(size)
            .build()
            .map_err(|e| StoreError::Database(sqlx::Error::Configuration(Box::new(e))))?;
        Ok(Self::new(pool))
    }

    /// The pool.
    #[must_use]
    pub fn pool(&self) -> &Pool<AsyncPgConnection> {
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
    /// for writing to the outbox beside a business change outside a handler. Dropped without
    /// [`Transaction::commit`], it rolls back.
    ///
    /// # Errors
    /// No connection could be had, or the server refused.
    pub async fn transaction(&self) -> Result<Transaction, StoreError> {
        self.begin_with("BEGIN").await
    }

    pub(crate) async fn connection(&self) -> Result<Connection, StoreError> {
        self.pool
            .get()
            .await
            .map(Connection::pooled)
            .map_err(pool_error)
    }

    pub(crate) async fn own_connection(&self) -> Result<Connection, StoreError> {
        self.pool
            .get()
            .await
            .map(Connection::own)
            .map_err(pool_error)
    }

    pub(crate) async fn begin_with(&self, statement: &str) -> Result<Transaction, StoreError> {
        Transaction::begin(self.connection().await?, statement).await
    }
}

/// A pool's failure: the server's answer classified by its SQLSTATE (a refused password is
/// not an outage), a URL that cannot be a connection a configuration error, anything else (a
/// wait for a free connection that timed out, a connection refused, a closed pool) the
/// database being unavailable.
fn pool_error(e: PoolError) -> StoreError {
    use diesel::ConnectionError;
    use diesel_async::pooled_connection::PoolError as Backend;
    match e {
        PoolError::Backend(
            Backend::QueryError(e)
            | Backend::ConnectionError(ConnectionError::CouldntSetupConfiguration(e)),
        ) => StoreError::from_diesel(e),
        PoolError::Backend(Backend::ConnectionError(
            e @ (ConnectionError::InvalidConnectionUrl(_) | ConnectionError::InvalidCString(_)),
        )) => StoreError::Database(sqlx::Error::Configuration(Box::new(e))),
        other => StoreError::Unavailable(sqlx::Error::Io(std::io::Error::other(other))),
    }
}

crate::stores::driver_store_base!(DieselPgStore, DieselPostgres);

impl PgEngine for DieselPgStore {
    async fn begin_with(&self, statement: String) -> Result<Transaction, StoreError> {
        Self::begin_with(self, &statement).await
    }

    fn wakers(&self) -> &LocalWakers {
        &self.wakers
    }

    fn max_connections(&self) -> u32 {
        u32::try_from(self.pool.status().max_size).unwrap_or(u32::MAX)
    }

    /// On a connection taken out of the pool for good, whose notifications diesel-async
    /// streams; a lost one is made again a second later, the waiters polling meanwhile.
    async fn listen(
        &self,
        channel: String,
        wake: Arc<Notify>,
        wanted: impl Fn(&str) -> bool + Send + Sync + 'static,
        what: &'static str,
    ) -> Result<Option<Subscription>, StoreError> {
        let first = listening(self, &channel).await?;
        let weak = Arc::downgrade(&wake);
        drop(wake);
        let store = self.clone();
        let task = tokio::spawn(async move {
            let mut held = Some(first);
            loop {
                if weak.strong_count() == 0 {
                    return;
                }
                let mut conn = match held.take() {
                    Some(conn) => conn,
                    None => match listening(&store, &channel).await {
                        Ok(conn) => {
                            // What was notified while the connection was down is lost: one
                            // waiter looks now rather than at its next poll.
                            if let Some(notify) = weak.upgrade() {
                                notify.notify_one();
                            }
                            conn
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, listener = what, "listener cannot connect");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        }
                    },
                };
                let mut notes = std::pin::pin!(conn.notifications_stream());
                while let Some(Ok(note)) = notes.next().await {
                    if wanted(&note.payload) {
                        match weak.upgrade() {
                            Some(notify) => notify.notify_one(),
                            None => return,
                        }
                    }
                }
                tracing::warn!(listener = what, "listener lost its connection");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Ok(Some(Subscription::new(task)))
    }
}

/// A connection of the store's own, listening on `channel`.
async fn listening(store: &DieselPgStore, channel: &str) -> Result<Connection, StoreError> {
    let mut conn = store.own_connection().await?;
    let quoted = channel.replace('"', "\"\"");
    DieselPgStore::execute_script(&format!("LISTEN \"{quoted}\""), &mut conn).await?;
    Ok(conn)
}

crate::stores::driver_store!(DieselPgStore);
