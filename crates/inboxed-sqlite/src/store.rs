//! [`Store`] for SQLite.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, Row, Sqlite, SqliteConnection, SqlitePool};

use inboxed_core::engine::claims;
use inboxed_core::sql::Queries;
use inboxed_core::store::{BeginParams, Claim, ClaimParams, DurabilityReport};
use inboxed_core::{ConsumerName, Envelope, Namespace, Store, StoreError};

use crate::queries::{CHECK_DURABILITY, TEMPLATES};

/// The inbox in an embedded SQLite file.
///
/// Every inbox transaction starts with `BEGIN IMMEDIATE`, taking SQLite's single write lock
/// before the claim instead of upgrading a read lock halfway through the handler (which fails
/// with `SQLITE_BUSY` and no wait). Writers therefore run one at a time; concurrent duplicates
/// queue at `BEGIN` and find the first one's committed row.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    pub(crate) ns: Namespace,
    pub(crate) queries: Arc<Queries>,
    /// Idle workers of this process, woken by receipts through any clone of this store: the
    /// only wake-up SQLite has, lacking notifications.
    pub(crate) wakers: inboxed_core::inbox::LocalWakers,
}

impl SqliteStore {
    /// A store over an existing pool, with tables prefixed `inboxed_` in database `main`.
    /// The pool's connections must use `synchronous = FULL` (see [`SqliteStore::open`]).
    #[must_use]
    pub fn new(pool: SqlitePool) -> Self {
        Self::with_namespace(pool, crate::default_namespace())
    }

    /// A store with a chosen table prefix. The schema must stay `main`: the processor refuses
    /// inbox tables in an attached database, whose commits are not atomic with `main`'s.
    #[must_use]
    pub fn with_namespace(pool: SqlitePool, ns: Namespace) -> Self {
        let queries = Arc::new(Queries::render(&TEMPLATES, &ns));
        Self {
            pool,
            ns,
            queries,
            wakers: inboxed_core::inbox::LocalWakers::default(),
        }
    }

    /// Opens (creating if missing) the database file at `path` with the settings the inbox
    /// needs: WAL journal, `synchronous = FULL` (durable commits), a 10 s busy timeout.
    ///
    /// # Errors
    /// The file cannot be opened or created.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        Self::connect_with(options).await
    }

    /// Like [`SqliteStore::open`], from a `sqlite://` URL.
    ///
    /// # Errors
    /// A malformed URL, or a file that cannot be opened.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(StoreError::from_sqlx)?
            .create_if_missing(true);
        Self::connect_with(options).await
    }

    async fn connect_with(options: SqliteConnectOptions) -> Result<Self, StoreError> {
        let options = options
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(Self::new(pool))
    }

    /// Creates or updates the inbox's tables in the store's namespace (the embedded
    /// migrations not yet applied, under a lock, so processes starting together apply each
    /// once) and returns the versions it applied. Run it at start, or run `inboxed migrate`
    /// from a deployment step instead.
    ///
    /// # Errors
    /// [`StoreError`] when the database is unreachable or refuses a migration.
    pub async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        <Self as Store>::migrate(self).await
    }

    /// The pool.
    #[must_use]
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub(crate) fn query(
        &self,
        sql: &Arc<str>,
    ) -> sqlx::query::Query<'static, Sqlite, sqlx::sqlite::SqliteArguments> {
        sqlx::query(AssertSqlSafe(Arc::clone(sql)))
    }
}

impl Store for SqliteStore {
    type Db = Sqlite;
    type Engine = Self;

    fn engine(&self) -> &Self {
        self
    }

    async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        inboxed_core::engine::migrate::run(self, &self.ns, crate::queries::MIGRATIONS).await
    }

    async fn check_durability(&self) -> Result<DurabilityReport, StoreError> {
        let row = sqlx::query(CHECK_DURABILITY)
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        let sync: i64 = row.try_get(0).map_err(StoreError::from_sqlx)?;
        let journal: String = row.try_get(1).map_err(StoreError::from_sqlx)?;
        if sync < 2 {
            return Err(StoreError::NonDurable {
                setting: "PRAGMA synchronous",
                value: format!("{sync} ({})", if sync == 0 { "OFF" } else { "NORMAL" }),
                hint: "Open the pool with synchronous = FULL (SqliteStore::open does), or set \
                       ProcessorConfig::allow_non_durable_commits knowingly.",
            });
        }
        if self.ns.schema() != "main" {
            return Err(StoreError::NonDurable {
                setting: "inbox database",
                value: self.ns.schema().to_owned(),
                hint: "SQLite makes a transaction that spans attached databases atomic per file \
                       only, so on a crash the claim and the business change could part. Keep the \
                       inbox tables in `main` (use a table prefix to keep them apart).",
            });
        }
        Ok(DurabilityReport {
            settings: vec![("synchronous", sync.to_string()), ("journal_mode", journal)],
            warnings: Vec::new(),
        })
    }

    async fn begin(
        &self,
        params: &BeginParams,
    ) -> Result<sqlx::Transaction<'static, Sqlite>, StoreError> {
        // SQLite transactions are serializable, and the only wait is for the write lock: the
        // busy timeout, set here from lock_timeout (it stays set on the connection), bounds it.
        // The handler deadline bounds the rest.
        let ms = params.lock_timeout.as_millis();
        let begin = format!("PRAGMA busy_timeout = {ms}; BEGIN IMMEDIATE");
        crate::engine::begin_on(&self.pool, begin).await
    }

    async fn claim(
        &self,
        conn: &mut SqliteConnection,
        params: &ClaimParams<'_>,
    ) -> Result<Claim, StoreError> {
        let claim = &self.queries.claim;
        claims::claim_key(self, conn, claim, params.consumer, params.envelope).await
    }

    async fn claim_many(
        &self,
        conn: &mut SqliteConnection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> Result<Vec<Claim>, StoreError> {
        claims::claim_each(self, conn, consumer, envelopes).await
    }
}
