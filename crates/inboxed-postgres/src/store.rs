//! [`Store`] for PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgConnection, PgPool, Postgres, Row};

use crate::key_lock;
use inboxed_core::retention::PartitionConfig;
use inboxed_core::sql::Queries;
use inboxed_core::store::{BeginParams, Claim, ClaimParams, DurabilityReport};
use inboxed_core::{ConsumerName, Envelope, Isolation, Namespace, Store, StoreError};

use crate::queries::{CHECK_DURABILITY, TEMPLATES};

/// The inbox on PostgreSQL, over the application's own pool so that handlers write to the
/// same database in the same transaction as the claim.
///
/// Behind a transaction-pooling PgBouncer, turn off the statement cache with
/// [`PgStore::persistent_statements`] unless the bouncer tracks prepared statements
/// (PgBouncer 1.21+ with `max_prepared_statements`); every setting the inbox needs is applied
/// transaction-scoped (`set_config(…, true)`, as `SET LOCAL`), and therefore safe there.
#[derive(Debug, Clone)]
pub struct PgStore {
    pub(crate) pool: PgPool,
    pub(crate) ns: Namespace,
    pub(crate) queries: Arc<Queries>,
    pub(crate) persistent: bool,
    /// Idle workers of this process, woken by receipts through any clone of this store.
    pub(crate) wakers: inboxed_core::inbox::LocalWakers,
    /// Partitioned mode: keys live in `processed_log`, by received time.
    pub(crate) partitions: Option<PartitionConfig>,
    /// The task pointing the pool at the primary, for a store connected to several hosts;
    /// it stops with the last clone.
    pub(crate) follower: Option<Arc<crate::failover::Follower>>,
}

/// How often a store connected to several hosts probes them for the primary.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

impl PgStore {
    /// A store in schema `public` with tables prefixed `inboxed_`.
    #[must_use]
    pub fn new(pool: PgPool) -> Self {
        Self::with_namespace(pool, crate::default_namespace())
    }

    /// A store in a chosen schema and prefix (see [`Namespace::new`]).
    #[must_use]
    pub fn with_namespace(pool: PgPool, ns: Namespace) -> Self {
        let queries = Arc::new(Queries::render(&TEMPLATES, &ns));
        Self {
            pool,
            ns,
            queries,
            persistent: true,
            wakers: inboxed_core::inbox::LocalWakers::default(),
            partitions: None,
            follower: None,
        }
    }

    /// The same store (its pool, and the following of the primary of a multi-host URL) with
    /// its tables in `ns`. Call it before [`PgStore::partitioned`].
    #[must_use]
    pub fn in_namespace(mut self, ns: Namespace) -> Self {
        self.queries = Arc::new(Queries::render(&TEMPLATES, &ns));
        self.ns = ns;
        self
    }

    /// Keeps processed keys in time partitions (`processed_log`, migration 5) instead of one
    /// table, so that expiry drops a partition in O(1) instead of deleting rows. Dedup stays
    /// global across partitions: a claim takes a lock on its key, then probes every live
    /// partition (docs/retention.md). Costs one more round trip per message, and needs READ
    /// COMMITTED (other isolation levels are refused at `begin`). `migrate` creates the first
    /// partitions; run a [`Purger`](inboxed_core::retention::Purger) to keep creating them
    /// ahead and to drop expired ones.
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

    /// Connects a pool of up to `max_connections` (default 10 when 0) to `url`, trying for
    /// up to 10 s ([`PgStore::connect_within`]).
    ///
    /// # Errors
    /// A malformed URL, or a database that cannot be reached.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        Self::connect_within(url, max_connections, Duration::from_secs(10)).await
    }

    /// [`PgStore::connect`], trying for up to `timeout`: a refused or failed connection is
    /// tried again until then (a database still starting), which is also how long a pool
    /// waits for a free connection later. A URL with several hosts
    /// (`postgres://app@db1:5432,db2:5432/app`) connects to the one that is the primary and
    /// follows the primary when a standby is promoted ([`crate::failover`]).
    ///
    /// # Errors
    /// A malformed URL, or a database that cannot be reached within `timeout`.
    pub async fn connect_within(
        url: &str,
        max_connections: u32,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let pool_options = Self::pool_options()
            .max_connections(if max_connections == 0 {
                10
            } else {
                max_connections
            })
            .acquire_timeout(timeout);
        if crate::failover::is_multi_host(url) {
            // Several hosts: the pool goes to the primary among them, and follows it.
            let started = std::time::Instant::now();
            loop {
                match crate::failover::connect(url, pool_options.clone(), FOLLOW_EVERY).await {
                    Ok((pool, follower)) => {
                        let mut store = Self::new(pool);
                        store.follower = Some(Arc::new(follower));
                        return Ok(store);
                    }
                    Err(e) if started.elapsed() >= timeout => return Err(e),
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }
        let options: PgConnectOptions = url.parse().map_err(StoreError::from_sqlx)?;
        let pool = pool_options
            .connect_with(options)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(Self::new(pool))
    }

    /// Pool options for a pool the store can share with the application, as
    /// [`PgStore::connect`] builds it: a connection is checked with a round trip as the pool
    /// hands it out only when it has sat idle for a second or more.
    ///
    /// sqlx checks every connection it hands out by default: one round trip more for every
    /// transaction, a processor's message 7 round trips instead of 6 (`inboxed-bench processor
    /// --latency-ms 1` counts them). A connection in steady use needs no check, and one that
    /// breaks anyway fails its transaction's first statement, as one that breaks a moment
    /// after a check would: a transient failure, and the delivery is tried again. Build your
    /// own pool from these options to keep that; `max_connections` and `acquire_timeout` are
    /// yours to set.
    #[must_use]
    pub fn pool_options() -> PgPoolOptions {
        inboxed_core::engine::pool::check_when_idle(PgPoolOptions::new())
    }

    /// Whether statements are prepared once per connection and cached. Defaults to `true`;
    /// set `false` behind a transaction-pooling proxy that does not track prepared statements.
    #[must_use]
    pub fn persistent_statements(mut self, persistent: bool) -> Self {
        self.persistent = persistent;
        self
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
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema and prefix.
    #[must_use]
    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    pub(crate) fn query(
        &self,
        sql: &Arc<str>,
    ) -> sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments> {
        sqlx::query(AssertSqlSafe(Arc::clone(sql))).persistent(self.persistent)
    }
}

/// The oldest server the migrations run on: 14, for `DETACH PARTITION … CONCURRENTLY`.
const MIN_SERVER_VERSION: i64 = 140_000;

/// Refuses a server older than the migrations need (`server_version.sql`'s number).
pub(crate) fn check_server_version(version: i64) -> Result<(), StoreError> {
    if version < MIN_SERVER_VERSION {
        return Err(StoreError::Unsupported {
            operation: "the inbox tables",
            reason: "need PostgreSQL 14 or later (the partitioned table's maintenance \
                     detaches partitions CONCURRENTLY and reads pg_inherits.inhdetachpending)",
        });
    }
    Ok(())
}

/// `begin.sql` for these settings and lock ids (empty: a transaction that claims nothing).
pub(crate) fn begin_statement(p: &BeginParams, locks: &[i64]) -> String {
    // The statement is the file's last line; its comment stays here, as it would travel with
    // every transaction.
    let template = include_str!("../sql/begin.sql")
        .lines()
        .rfind(|line| !line.is_empty())
        .unwrap_or_default();
    let level = match p.isolation {
        Isolation::ReadCommitted => "READ COMMITTED",
        Isolation::RepeatableRead => "REPEATABLE READ",
        _ => "SERIALIZABLE",
    };
    let no_flush = if p.durable_commit {
        ""
    } else {
        ", set_config('synchronous_commit', 'off', true)"
    };
    let locks: String = locks
        .iter()
        .map(|id| format!(", pg_advisory_xact_lock_shared({id})"))
        .collect();
    template
        .replace("{{isolation}}", level)
        .replace("{{lock_timeout}}", &p.lock_timeout.as_millis().to_string())
        .replace(
            "{{statement_timeout}}",
            &p.statement_timeout.as_millis().to_string(),
        )
        .replace(
            "{{idle_timeout}}",
            &p.idle_in_transaction_timeout.as_millis().to_string(),
        )
        .replace("{{no_flush}}", no_flush)
        .replace("{{locks}}", &locks)
}

impl PgStore {
    /// `BEGIN` with the transaction's settings and, in the same round trip, the shared locks
    /// of the keys it will claim (`locks`; empty for any other transaction).
    async fn begin_locked(
        &self,
        params: &BeginParams,
        locks: &[i64],
    ) -> Result<sqlx::Transaction<'static, Postgres>, StoreError> {
        if self.partitions.is_some() && params.isolation != Isolation::ReadCommitted {
            return Err(StoreError::Unsupported {
                operation: "partitioned dedup under REPEATABLE READ or SERIALIZABLE",
                reason: "the claim's probe must see the commits made while it waited for the \
                         key lock, which takes a fresh snapshot per statement: use \
                         Isolation::ReadCommitted, or the unpartitioned table",
            });
        }
        self.pool
            .begin_with(AssertSqlSafe(begin_statement(params, locks)))
            .await
            .map_err(StoreError::from_sqlx)
    }
}

impl Store for PgStore {
    type Db = Postgres;
    type Engine = Self;

    fn engine(&self) -> &Self {
        self
    }

    async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        let version: i32 = self
            .query(&self.queries.server_version)
            .fetch_one(&self.pool)
            .await
            .and_then(|r| r.try_get(0))
            .map_err(StoreError::from_sqlx)?;
        check_server_version(i64::from(version))?;
        let applied =
            inboxed_core::engine::migrate::run(self, &self.ns, crate::queries::MIGRATIONS).await?;
        if let Some(config) = self.partitions {
            let mut conn = crate::partitions::connect(self).await?;
            crate::partitions::create(self, &mut conn, config).await?;
        }
        Ok(applied)
    }

    async fn register_consumer(&self, consumer: &ConsumerName) -> Result<(), StoreError> {
        let query = self
            .query(&self.queries.register_consumer)
            .bind(consumer.as_str());
        self.autocommit_count(crate::engine::PgQuery::prepared(query))
            .await
            .map(drop)
    }

    async fn check_durability(&self) -> Result<DurabilityReport, StoreError> {
        crate::capabilities::check(self).await?;
        // The simple protocol: one exchange, nothing prepared, safe behind any proxy.
        let row = sqlx::raw_sql(CHECK_DURABILITY)
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        let get = StoreError::from_sqlx;
        crate::standbys::report(
            row.try_get(0).map_err(get)?,
            row.try_get(1).map_err(get)?,
            crate::standbys::Standbys {
                in_recovery: row.try_get(2).map_err(get)?,
                names: row.try_get(3).map_err(get)?,
                streaming: row.try_get(4).map_err(get)?,
                synchronous: row.try_get(5).map_err(get)?,
                unreadable: row.try_get(6).map_err(get)?,
            },
        )
    }

    async fn begin(
        &self,
        params: &BeginParams,
    ) -> Result<sqlx::Transaction<'static, Postgres>, StoreError> {
        self.begin_locked(params, &[]).await
    }

    /// The claims' shared key locks ride in the `BEGIN`'s round trip (`begin.sql`).
    async fn begin_claims(
        &self,
        params: &BeginParams,
        consumer: &ConsumerName,
        ids: &[&str],
    ) -> Result<sqlx::Transaction<'static, Postgres>, StoreError> {
        self.begin_locked(params, &key_lock::claim_locks(consumer, ids))
            .await
    }

    async fn claim(
        &self,
        conn: &mut PgConnection,
        params: &ClaimParams<'_>,
    ) -> Result<Claim, StoreError> {
        self.claim_key(conn, params.consumer, params.envelope).await
    }

    async fn claim_many(
        &self,
        conn: &mut PgConnection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> Result<Vec<Claim>, StoreError> {
        self.claim_keys(conn, consumer, envelopes).await
    }
}
