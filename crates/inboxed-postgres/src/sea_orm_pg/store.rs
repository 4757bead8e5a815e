//! The store on SeaORM: transactions begun through SeaORM, and what runs outside a
//! transaction (sessions, single statements, `LISTEN`) on the sqlx pool beneath SeaORM;
//! `Store` and `InboxStore` are stamped by [`crate::stores`] from PostgreSQL's own operations
//! as every driver runs them (`common.rs`).

use std::sync::Arc;
use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, SqlxPostgresConnector, TransactionTrait};
use sqlx::PgPool;
use tokio::sync::Notify;

use inboxed_core::inbox::LocalWakers;
use inboxed_core::inbox::store::Subscription;
use inboxed_core::sql::Queries;
use inboxed_core::{Namespace, Store, StoreError};

use super::driver::{Connection, SeaOrmPostgres, Transaction};
use crate::common::PgEngine;
use crate::queries::TEMPLATES;

/// The inbox on PostgreSQL through SeaORM 2, over the application's `DatabaseConnection`, so
/// that handlers write through SeaORM in the same transaction as the claim. Handlers implement
/// `Handler<SeaOrmPostgres>` and receive a [`Connection`](super::Connection), a SeaORM
/// connection inside the inbox transaction.
///
/// It serves what [`PgStore`](crate::PgStore) serves, on the same tables, except
/// time-partitioned keys.
#[derive(Clone)]
pub struct SeaOrmPgStore {
    db: DatabaseConnection,
    /// The sqlx pool beneath `db`.
    pub(crate) pool: PgPool,
    pub(crate) ns: Namespace,
    pub(crate) queries: Arc<Queries>,
    /// Idle workers of this process, woken by receipts through any clone of this store.
    wakers: LocalWakers,
}

impl std::fmt::Debug for SeaOrmPgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeaOrmPgStore")
            .field("ns", &self.ns)
            .finish_non_exhaustive()
    }
}

impl SeaOrmPgStore {
    /// A store in schema `public` with tables prefixed `inboxed_`, over `db`.
    ///
    /// # Errors
    /// `db` is not a PostgreSQL connection on sqlx (SeaORM's `sqlx-postgres`).
    pub fn new(db: DatabaseConnection) -> Result<Self, StoreError> {
        Self::with_namespace(db, crate::default_namespace())
    }

    /// A store in a chosen schema and prefix (see [`Namespace::new`]).
    ///
    /// # Errors
    /// `db` is not a PostgreSQL connection on sqlx (SeaORM's `sqlx-postgres`).
    pub fn with_namespace(db: DatabaseConnection, ns: Namespace) -> Result<Self, StoreError> {
        let sea_orm::DatabaseConnectionType::SqlxPostgresPoolConnection(_) = &db.inner else {
            return Err(StoreError::Database(sqlx::Error::Configuration(
                "the inbox on SeaORM needs a PostgreSQL connection on sqlx (sqlx-postgres)".into(),
            )));
        };
        Ok(Self {
            pool: db.get_postgres_connection_pool().clone(),
            db,
            queries: Arc::new(Queries::render(&TEMPLATES, &ns)),
            ns,
            wakers: LocalWakers::default(),
        })
    }

    /// A pool of up to `max_connections` (10 when 0) to `url`, with
    /// [`PgStore::pool_options`](crate::PgStore::pool_options) (a reused connection checked
    /// only after it idled), and a store over it.
    ///
    /// # Errors
    /// A malformed URL, or a database that cannot be reached within 10 seconds.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = url
            .parse::<sqlx::postgres::PgConnectOptions>()
            .map_err(StoreError::from_sqlx)?;
        let pool = crate::PgStore::pool_options()
            .max_connections(if max_connections == 0 {
                10
            } else {
                max_connections
            })
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(StoreError::from_sqlx)?;
        Self::new(SqlxPostgresConnector::from_sqlx_postgres_pool(pool))
    }

    /// The SeaORM connection the store runs on.
    #[must_use]
    pub fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Creates or updates the inbox's tables, as [`PgStore::migrate`](crate::PgStore::migrate)
    /// does (the same migrations, recorded in the same table).
    ///
    /// # Errors
    /// [`StoreError`] when the database is unreachable or refuses a migration.
    pub async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        <Self as Store>::migrate(self).await
    }

    /// A SeaORM transaction (`BEGIN`, the server's default isolation), for writing to the
    /// outbox beside a business change outside a handler. Dropped without
    /// [`Transaction::commit`], it rolls back.
    ///
    /// # Errors
    /// No connection could be had, or the server refused.
    pub async fn transaction(&self) -> Result<Transaction, StoreError> {
        self.begin_with("BEGIN").await
    }

    /// A connection of its own, outside the pool and any transaction, with the pool's
    /// connect options.
    pub(crate) async fn own_session(&self) -> Result<Connection, StoreError> {
        use sqlx::Connection as _;
        sqlx::PgConnection::connect_with(&self.pool.connect_options())
            .await
            .map(Connection::session)
            .map_err(StoreError::from_sqlx)
    }

    /// A SeaORM transaction with `statement`'s settings: SeaORM sends its own `BEGIN`, and
    /// what `statement` has after its `BEGIN` (isolation, timeouts, key locks) follows in one
    /// more round trip.
    pub(crate) async fn begin_with(&self, statement: &str) -> Result<Transaction, StoreError> {
        let tx = self.db.begin().await.map_err(StoreError::from_sea_orm)?;
        if let Some(settings) = after_begin(statement) {
            tx.execute_unprepared(&settings)
                .await
                .map_err(StoreError::from_sea_orm)?;
        }
        Ok(Transaction::new(tx))
    }
}

/// What a `BEGIN` statement sets beyond beginning, as statements that run once the
/// transaction is open: `BEGIN ISOLATION LEVEL …` becomes `SET TRANSACTION ISOLATION LEVEL
/// …`, and what follows the first `;` stays as written. `None` for a bare `BEGIN`.
fn after_begin(statement: &str) -> Option<String> {
    let rest = statement.trim().strip_prefix("BEGIN")?.trim_start();
    if let Some(rest) = rest.strip_prefix(';') {
        let rest = rest.trim();
        return (!rest.is_empty()).then(|| rest.to_owned());
    }
    (!rest.is_empty()).then(|| format!("SET TRANSACTION {rest}"))
}

crate::stores::driver_store_base!(SeaOrmPgStore, SeaOrmPostgres);

impl PgEngine for SeaOrmPgStore {
    async fn begin_with(&self, statement: String) -> Result<Transaction, StoreError> {
        Self::begin_with(self, &statement).await
    }

    fn wakers(&self) -> &LocalWakers {
        &self.wakers
    }

    fn max_connections(&self) -> u32 {
        self.pool.options().get_max_connections()
    }

    /// sqlx's listener, on a connection of the pool beneath SeaORM made for it.
    async fn listen(
        &self,
        channel: String,
        wake: Arc<Notify>,
        wanted: impl Fn(&str) -> bool + Send + Sync + 'static,
        what: &'static str,
    ) -> Result<Option<Subscription>, StoreError> {
        crate::inbox::listen_on(&self.pool, &channel, wake, wanted, what)
            .await
            .map(Some)
    }
}

crate::stores::driver_store!(SeaOrmPgStore);

#[cfg(test)]
mod tests {
    use super::after_begin;

    #[test]
    fn begin_settings_follow_seaorm_begin() {
        assert_eq!(after_begin("BEGIN"), None);
        assert_eq!(after_begin("BEGIN;"), None);
        assert_eq!(
            after_begin("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT 1").as_deref(),
            Some("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; SELECT 1")
        );
        assert_eq!(
            after_begin("BEGIN;\nSET LOCAL enable_sort = off").as_deref(),
            Some("SET LOCAL enable_sort = off")
        );
    }
}
