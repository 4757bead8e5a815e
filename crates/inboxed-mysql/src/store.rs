//! The store's pool and the server it runs on: the connection settings every transaction of the
//! inbox relies on, and the refusal of a server that cannot keep the guarantee.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Executor, MySql, MySqlConnection, Row};

use inboxed_core::retention::PartitionConfig;
use inboxed_core::sql::Queries;
use inboxed_core::store::{BeginParams, Claim, ClaimParams, DurabilityReport, Isolation};
use inboxed_core::{ConsumerName, Envelope, Namespace, StoreError};

use crate::queries::TEMPLATES;
use crate::query::{MySqlQuery, Scripts};
use crate::server::{Server, judge, url_without_password};

/// The inbox in a MySQL 8.0.16+ or MariaDB 10.6+ database (InnoDB).
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pub(crate) pool: MySqlPool,
    pub(crate) ns: Namespace,
    pub(crate) queries: Arc<Queries>,
    pub(crate) scripts: Arc<Scripts>,
    /// Idle workers of this process, woken by receipts through any clone of this store (there
    /// are no server notifications on MySQL: other processes' workers poll).
    pub(crate) wakers: inboxed_core::inbox::LocalWakers,
    /// Partitioned mode ([`MySqlStore::partitioned`]): keys in `processed_log`.
    pub(crate) partitions: Option<PartitionConfig>,
}

/// The session bounds a store transaction sets (its `begin`), back to the server's
/// defaults (`/*M! … */` is read by MariaDB only, which alone has `max_statement_time`), and
/// the named locks the session holds released: a lock-held relay batch's (outbox_lock.sql)
/// marks the batch live until then, whether its transaction committed or failed.
const RESET_BOUNDS: &str = "SET SESSION innodb_lock_wait_timeout = DEFAULT, \
                            SESSION wait_timeout = DEFAULT \
                            /*M! , SESSION max_statement_time = DEFAULT */; \
                            DO RELEASE_ALL_LOCKS()";

impl MySqlStore {
    /// A store over an existing pool, its tables in `ns` (the schema is the database). The
    /// pool's connections must run READ COMMITTED in UTC (`time_zone = '+00:00'`), and should
    /// be reset when they return to the pool: build it from [`MySqlStore::pool_options`], as
    /// [`MySqlStore::connect`] does.
    #[must_use]
    pub fn new(pool: MySqlPool, ns: Namespace) -> Self {
        let ns = ns.with_backticks();
        let queries = Arc::new(Queries::render(&TEMPLATES, &ns));
        Self {
            pool,
            ns,
            queries,
            scripts: Arc::default(),
            wakers: inboxed_core::inbox::LocalWakers::default(),
            partitions: None,
        }
    }

    /// This store in time-partitioned mode: processed keys go to `processed_log` (migration
    /// 6), partitioned by the time in their UUIDv7 ids, and the purger drops expired partitions
    /// instead of deleting rows (docs/retention.md). `migrate` and every purge pass create
    /// `config.ahead` partitions past the current one.
    #[must_use]
    pub fn partitioned(mut self, config: PartitionConfig) -> Self {
        self.queries = Arc::new(Queries::render_for(
            &TEMPLATES,
            &self.ns,
            inboxed_core::sql::PROCESSED_PARTITIONED,
        ));
        self.partitions = Some(config);
        self
    }

    /// The partitions of the time-partitioned table, in order (whether or not this store is in
    /// partitioned mode).
    ///
    /// # Errors
    /// The session or the query failed.
    pub async fn partitions(&self) -> Result<Vec<crate::Partition>, StoreError> {
        let mut conn = crate::partitions::connect(self).await?;
        crate::partitions::list(self, &mut conn).await
    }

    /// What a maintenance pass with `windows` at `now` would do with each time partition the
    /// shortest window has passed over: drop it (`None`), or keep it and why. Nothing changes.
    ///
    /// # Errors
    /// The session or a query failed.
    pub async fn partitions_expiry_plan(
        &self,
        now: std::time::SystemTime,
        windows: &[(ConsumerName, std::time::Duration)],
    ) -> Result<Vec<(crate::Partition, Option<String>)>, StoreError> {
        let mut conn = crate::partitions::connect(self).await?;
        crate::partitions::plan(self, &mut conn, now, windows).await
    }

    /// The operation `sql` (PostgreSQL-style `$n` placeholders, one or more statements), to
    /// bind arguments to; a malformed `sql` fails when it runs.
    pub(crate) fn script(&self, sql: &Arc<str>) -> MySqlQuery {
        MySqlQuery::new(self.scripts.get(sql))
    }

    /// Connects to a `mysql://` URL (also for MariaDB), with the database in the URL as the
    /// inbox's schema, up to `max_connections` connections, each set to READ COMMITTED.
    ///
    /// READ COMMITTED because InnoDB's default, REPEATABLE READ, takes gap locks: a claim with
    /// `SKIP LOCKED` then blocked producers' inserts into the gap it had read (for 2.3 s in a
    /// run on MariaDB 10.11, against 0.05 s under READ COMMITTED). The claim's unique key, not
    /// the isolation level, is what makes a duplicate wait and then see the first commit.
    ///
    /// # Errors
    /// A malformed URL, a URL without a database, or a server that cannot be reached.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = MySqlConnectOptions::from_str(url).map_err(StoreError::from_sqlx)?;
        let Some(database) = options.get_database().map(str::to_owned) else {
            return Err(StoreError::InvalidIdentifier {
                name: url_without_password(url),
                reason: "the URL names no database: the inbox's tables live in the database \
                         of the business tables it shares transactions with",
            });
        };
        let ns = Namespace::new(&database, "inboxed_")?;
        let pool = Self::pool_options()
            .max_connections(max_connections)
            .connect_with(options)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(Self::new(pool, ns))
    }

    /// Pool options for a pool the store can share with the application, as
    /// [`MySqlStore::connect`] builds it: every new connection READ COMMITTED in UTC, and every
    /// connection returned to the pool with the session bounds the store's transactions set
    /// (lock wait, statement and idle timeouts) put back to the server's defaults.
    ///
    /// MySQL has no `SET LOCAL`: a store transaction sets its bounds on the session, and they
    /// outlived it. A purge batch bounded to 0.3 s left `wait_timeout = 1` and
    /// `max_statement_time = 0.3` on its connection, and the next user of that connection, the
    /// application's own transaction, was killed by the server after one idle second. The reset
    /// also releases the session's named locks (`GET_LOCK`: a lock-held relay batch holds one
    /// until its connection is back), and costs one round trip per connection returned to the
    /// pool.
    ///
    /// A connection is checked with a round trip as the pool hands it out only when it has sat
    /// idle a second or more, not every time as sqlx's default does: one that breaks in
    /// steady use fails its transaction's first statement, and the delivery is tried again.
    #[must_use]
    pub fn pool_options() -> MySqlPoolOptions {
        inboxed_core::engine::pool::check_when_idle(MySqlPoolOptions::new())
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute(
                        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; \
                         SET time_zone = '+00:00'",
                    )
                    .await
                    .map(drop)
                })
            })
            .after_release(|conn, _meta| {
                Box::pin(async move { conn.execute(RESET_BOUNDS).await.map(|_| true) })
            })
    }

    /// Creates or updates the inbox's tables in the store's namespace (the embedded
    /// migrations not yet applied, under a lock, so processes starting together apply each
    /// once) and returns the versions it applied. Run it at start, or run `inboxed migrate`
    /// from a deployment step instead.
    ///
    /// # Errors
    /// [`StoreError`] when the database is unreachable or refuses a migration.
    pub async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        <Self as inboxed_core::Store>::migrate(self).await
    }

    /// The pool.
    #[must_use]
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// This store's database and table prefix.
    #[must_use]
    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    /// Reads the server's version and settings and refuses those under which an acknowledged
    /// message could lose its effect or a claim could be wrong (see [`judge`]).
    ///
    /// # Errors
    /// [`StoreError::NonDurable`] or [`StoreError::ServerUnfit`] naming the setting, or the
    /// query failed.
    pub async fn check_server(&self) -> Result<DurabilityReport, StoreError> {
        let row = sqlx::query(crate::queries::CHECK_SERVER)
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        let get_text = |i| row.try_get::<String, _>(i).map_err(StoreError::from_sqlx);
        let get_int = |i| row.try_get::<i64, _>(i).map_err(StoreError::from_sqlx);
        judge(&Server {
            version: get_text(0)?,
            flush_log_at_trx_commit: get_int(1)?,
            log_bin: get_int(2)? != 0,
            sync_binlog: get_int(3)?,
            sql_mode: get_text(4)?,
            storage_engine: get_text(5)?,
        })
    }
}

impl inboxed_core::Store for MySqlStore {
    type Db = sqlx::MySql;
    type Engine = Self;

    fn engine(&self) -> &Self {
        self
    }

    /// In partitioned mode, also creates the partitions ahead, under the maintenance lock:
    /// processes starting together would otherwise carve the same partition twice (1517).
    /// When another process holds the lock, its pass creates them.
    async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        let applied =
            inboxed_core::engine::migrate::run(self, &self.ns, crate::queries::MIGRATIONS).await?;
        if let Some(config) = self.partitions {
            crate::partitions::maintain(self, config, std::time::SystemTime::now(), &[]).await?;
        }
        Ok(applied)
    }

    async fn check_durability(&self) -> Result<DurabilityReport, StoreError> {
        self.check_server().await
    }

    /// MySQL has no `SET LOCAL`: the bounds are set on the session before the transaction
    /// begins, in the same round trip, and stay on the pooled connection until the next
    /// transaction of the store sets them again. The idle bound is the session's
    /// `wait_timeout` (the server ends a session idle that long, in a transaction or not),
    /// and the statement bound MariaDB's `max_statement_time`. A lock wait is bounded by the
    /// statement bound too (`innodb_lock_wait_timeout`, whole seconds, at least 1): under load
    /// `max_statement_time` let a purge bounded to 0.3 s wait 2 s on a row lock and then run,
    /// and MySQL's `max_execution_time` bounds only `SELECT`s. `durable_commit` has no
    /// per-transaction form here (`innodb_flush_log_at_trx_commit` is global): every commit
    /// is durable.
    async fn begin(
        &self,
        p: &BeginParams,
    ) -> Result<sqlx::Transaction<'static, MySql>, StoreError> {
        let secs = |d: std::time::Duration| d.as_secs().max(1) + u64::from(d.subsec_nanos() > 0);
        let isolation = match p.isolation {
            Isolation::ReadCommitted => "READ COMMITTED",
            Isolation::RepeatableRead => "REPEATABLE READ",
            Isolation::Serializable => "SERIALIZABLE",
            _ => "SERIALIZABLE",
        };
        // ROLLBACK first: a task cancelled while its BEGIN was on the wire leaves the server
        // in a transaction that the client never registered, so nothing rolls it back when
        // the connection returns to the pool. On MySQL the next `SET TRANSACTION` then fails
        // (1568: `inboxed demo` requeued 184 of 3,079 deliveries for it, and one message ran
        // out of attempts), and a plain BEGIN would commit whatever that transaction held.
        // Whatever is open here belongs to a cancelled task: it is never to be committed.
        // The savepoint `inboxed_settle` is for the settling statement's check
        // (clear_attempts.sql): a transaction the server rolled back under a handler that
        // swallowed the error has lost it.
        let begin = format!(
            "ROLLBACK; SET SESSION innodb_lock_wait_timeout = {}, SESSION wait_timeout = {}; \
             /*M! SET SESSION max_statement_time = {:.3} */; \
             SET TRANSACTION ISOLATION LEVEL {isolation}; BEGIN; SAVEPOINT inboxed_settle",
            secs(p.lock_timeout.min(p.statement_timeout)),
            secs(p.idle_in_transaction_timeout),
            p.statement_timeout.as_secs_f64(),
        );
        self.pool
            .begin_with(AssertSqlSafe(begin))
            .await
            .map_err(StoreError::from_sqlx)
    }

    async fn claim(
        &self,
        conn: &mut MySqlConnection,
        params: &ClaimParams<'_>,
    ) -> Result<Claim, StoreError> {
        self.claim_one(conn, params.consumer, params.envelope).await
    }

    async fn claim_many(
        &self,
        conn: &mut MySqlConnection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> Result<Vec<Claim>, StoreError> {
        self.claim_keys(conn, consumer, envelopes).await
    }
}

/// The backlog and dead letters behind `inboxed serve`, as the shared layer reads them (its
/// statements come with store-then-process on this engine).
impl inboxed_core::observe::ObserveStore for MySqlStore {}
