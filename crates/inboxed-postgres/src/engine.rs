//! What PostgreSQL gives the shared store layer ([`inboxed_core::engine`]): arrays for lists,
//! `int4` counts, the derived key and payload fingerprint of the processed-keys table, claims
//! planned anew each time, and statements that run alone through [`PgStore::autocommit`]
//! (inside a transaction behind a proxy).

use std::sync::Arc;

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Postgres, Row};

use inboxed_core::engine::{Args, Engine};
use inboxed_core::migration::Migration;
use inboxed_core::outbox::OutboxRow;
use inboxed_core::outbox::store::{ClaimOutboxParams, LockOutboxParams, MarkParams, WriteParams};
use inboxed_core::sql::Queries;
use inboxed_core::{ConsumerName, Envelope, Namespace, StoreError, StoredHash};

use crate::common::{self, PgArgs};
use crate::inline::{Inline, Value};
use crate::key::message_key;
use crate::store::PgStore;

/// A PostgreSQL statement with its arguments: prepared, or sent as text with them written in
/// ([`crate::inline`]: the claims, in one round trip and planned for their values).
pub struct PgQuery(pub(crate) Sent);

/// How a [`PgQuery`] goes to the server.
pub(crate) enum Sent {
    Prepared(sqlx::query::Query<'static, Postgres, PgArguments>),
    Inline(Inline),
}

impl std::fmt::Debug for PgQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgQuery").finish_non_exhaustive()
    }
}

impl PgQuery {
    pub(crate) fn prepared(q: sqlx::query::Query<'static, Postgres, PgArguments>) -> Self {
        Self(Sent::Prepared(q))
    }

    /// Binds `v`, or writes it in.
    fn bind<T>(self, v: T) -> Self
    where
        T: for<'q> sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres> + Into<Value> + Send + 'static,
    {
        Self(match self.0 {
            Sent::Prepared(q) => Sent::Prepared(q.bind(v)),
            Sent::Inline(q) => Sent::Inline(q.push(v.into())),
        })
    }

    /// Runs the statement on `conn`; the rows it changed.
    pub(crate) async fn execute<'c, E>(self, conn: E) -> Result<u64, StoreError>
    where
        E: sqlx::Executor<'c, Database = Postgres>,
    {
        match self.0 {
            Sent::Prepared(q) => q
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
                .map_err(StoreError::from_sqlx),
            Sent::Inline(q) => q.execute(conn).await,
        }
    }

    /// Runs the statement on `conn`; the rows it returned.
    pub(crate) async fn fetch_all<'c, E>(self, conn: E) -> Result<Vec<PgRow>, StoreError>
    where
        E: sqlx::Executor<'c, Database = Postgres>,
    {
        match self.0 {
            Sent::Prepared(q) => q.fetch_all(conn).await.map_err(StoreError::from_sqlx),
            Sent::Inline(q) => q.fetch_all(conn).await,
        }
    }

    /// Whether the statement is one message the server runs as a transaction of its own.
    pub(crate) fn is_inline(&self) -> bool {
        matches!(self.0, Sent::Inline(_))
    }
}

impl Args for PgQuery {
    fn text(self, v: &str) -> Self {
        self.bind(v.to_owned())
    }
    fn opt_text(self, v: Option<&str>) -> Self {
        self.bind(v.map(str::to_owned))
    }
    fn bytes(self, v: &[u8]) -> Self {
        self.bind(v.to_vec())
    }
    fn opt_bytes(self, v: Option<&[u8]>) -> Self {
        self.bind(v.map(<[u8]>::to_vec))
    }
    fn int(self, v: i64) -> Self {
        self.bind(v)
    }
    fn count(self, v: u32) -> Self {
        self.bind(i32::try_from(v).unwrap_or(i32::MAX))
    }
    fn opt_int(self, v: Option<i64>) -> Self {
        self.bind(v)
    }
    fn flag(self, v: bool) -> Self {
        self.bind(v)
    }
    fn opt_ids(self, v: Option<&[i64]>) -> Self {
        self.bind(v.map(<[i64]>::to_vec))
    }
    fn texts(self, v: &[&str]) -> Self {
        let v: Vec<Option<String>> = v.iter().map(|s| Some((*s).to_owned())).collect();
        self.bind(v)
    }
}

impl PgArgs for PgQuery {
    fn opt_texts(self, v: &[Option<&str>]) -> Self {
        let v: Vec<Option<String>> = v.iter().map(|s| s.map(str::to_owned)).collect();
        self.bind(v)
    }
    fn byteas(self, v: &[&[u8]]) -> Self {
        let v: Vec<Vec<u8>> = v.iter().map(|b| b.to_vec()).collect();
        self.bind(v)
    }
    fn int4s(self, v: &[i32]) -> Self {
        self.bind(v.to_vec())
    }
}

impl Engine for PgStore {
    type Query = PgQuery;
    type Row = PgRow;

    fn queries(&self) -> &Queries {
        &self.queries
    }

    fn namespace(&self) -> &Namespace {
        &self.ns
    }

    fn migrations(&self) -> &'static [Migration] {
        crate::queries::MIGRATIONS
    }

    fn query(&self, sql: &Arc<str>) -> PgQuery {
        PgQuery::prepared(Self::query(self, sql))
    }

    fn fresh(&self, sql: &Arc<str>) -> PgQuery {
        PgQuery(Sent::Inline(Inline::new(sql)))
    }

    fn key(q: PgQuery, message_id: Option<&str>) -> PgQuery {
        q.bind(message_id.map(|id| message_key(id).into_owned()))
    }

    fn dead_letter_lock(q: PgQuery, consumer: &ConsumerName, message_id: &str) -> PgQuery {
        q.int(crate::key_lock::key_lock(consumer, message_id))
            .int(crate::key_lock::bucket_lock(consumer, message_id))
    }

    fn claimed(q: PgQuery, env: &Envelope) -> PgQuery {
        // The same 32 bits as a signed integer, the column's type.
        let fingerprint = env.hash().fingerprint().cast_signed();
        q.bind(message_key(env.id().as_str()).into_owned())
            .bind(fingerprint)
    }

    fn stored_hash(row: &PgRow, i: usize) -> Result<Option<StoredHash>, StoreError> {
        let fingerprint: Option<i32> = row.try_get(i).map_err(StoreError::from_sqlx)?;
        Ok(fingerprint.map(|f| StoredHash::Fingerprint(f.cast_unsigned())))
    }

    async fn execute(q: Self::Query, conn: &mut PgConnection) -> Result<u64, StoreError> {
        q.execute(conn).await
    }

    async fn execute_script(sql: &str, conn: &mut PgConnection) -> Result<(), StoreError> {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(conn)
            .await
            .map(drop)
            .map_err(StoreError::from_sqlx)
    }

    async fn fetch_all(q: Self::Query, conn: &mut PgConnection) -> Result<Vec<PgRow>, StoreError> {
        q.fetch_all(conn).await
    }

    async fn fetch_alone(&self, q: Self::Query) -> Result<Vec<PgRow>, StoreError> {
        self.autocommit(q).await
    }

    async fn execute_alone(&self, q: Self::Query) -> Result<u64, StoreError> {
        self.autocommit_count(q).await
    }

    async fn session(&self) -> Result<PgConnection, StoreError> {
        PgConnection::connect_with(&self.pool.connect_options())
            .await
            .map_err(StoreError::from_sqlx)
    }

    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, Postgres>, StoreError> {
        self.pool.begin().await.map_err(StoreError::from_sqlx)
    }
}

/// The backlog and dead letters behind `inboxed serve`, as the shared layer reads them.
impl inboxed_core::observe::ObserveStore for PgStore {}

/// The outbox as the shared layer has it, with PostgreSQL's own operations
/// (`common.rs`) and NOTIFY wake-ups for its relays.
impl inboxed_core::outbox::store::OutboxStore for PgStore {
    async fn write_outbox_many(
        &self,
        conn: &mut PgConnection,
        params: &[WriteParams<'_>],
    ) -> Result<(), StoreError> {
        common::write_outbox_many(self, conn, params).await
    }

    fn locks_outbox(&self) -> bool {
        true
    }

    fn max_connections(&self) -> Option<u32> {
        Some(common::PgEngine::max_connections(self))
    }

    async fn claim_outbox(
        &self,
        params: &ClaimOutboxParams<'_>,
    ) -> Result<Vec<OutboxRow>, StoreError> {
        common::claim_outbox(self, params).await
    }

    async fn lock_outbox(
        &self,
        conn: &mut PgConnection,
        params: &LockOutboxParams,
    ) -> Result<Vec<OutboxRow>, StoreError> {
        common::lock_outbox(self, conn, params).await
    }

    async fn mark_outbox(
        &self,
        conn: &mut PgConnection,
        p: &MarkParams<'_>,
    ) -> Result<(), StoreError> {
        common::mark_outbox(self, conn, p).await
    }

    async fn listen_outbox(
        &self,
        wake: std::sync::Arc<tokio::sync::Notify>,
    ) -> Result<Option<inboxed_core::inbox::store::Subscription>, StoreError> {
        common::listen_outbox(self, wake).await
    }
}
