//! What tokio-postgres gives the shared store layer: statements prepared once a connection
//! (deadpool-postgres's statement cache) and then bound and run in one round trip, the claims
//! of stored rows planned anew each time (sent with their parameter types, nothing prepared:
//! [`Engine::fresh`] says why), rows read by position, and the same
//! SQL files and derived keys as the sqlx store.

use std::sync::Arc;

use tokio_postgres::types::{ToSql, Type};

use inboxed_core::engine::{Args, Columns, Engine};
use inboxed_core::migration::Migration;
use inboxed_core::sql::Queries;
use inboxed_core::{ConsumerName, Envelope, Namespace, StoreError, StoredHash};

use super::driver::{Connection, Transaction};
use super::store::TokioPgStore;
use crate::common::PgArgs;
use crate::key::message_key;

type Param = (Box<dyn ToSql + Send + Sync>, Type);

/// A statement with its arguments and their PostgreSQL types, the ones sqlx would declare for
/// the same Rust values, so that the SQL files read them alike.
pub struct TokioPgQuery {
    sql: Arc<str>,
    params: Vec<Param>,
    /// Prepared once a connection and kept (`false`: planned anew each time).
    prepared: bool,
    /// The prepared statement, once [`TokioPgQuery::prepare`] made or found it.
    statement: Option<tokio_postgres::Statement>,
}

impl std::fmt::Debug for TokioPgQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokioPgQuery").finish_non_exhaustive()
    }
}

impl TokioPgQuery {
    pub(crate) fn new(sql: &Arc<str>) -> Self {
        Self {
            sql: Arc::clone(sql),
            params: Vec::new(),
            prepared: true,
            statement: None,
        }
    }

    fn unprepared(sql: &Arc<str>) -> Self {
        Self {
            prepared: false,
            ..Self::new(sql)
        }
    }

    /// The statement prepared on `client` (found in its cache, or prepared there: a round
    /// trip), where it is kept prepared; after this, running it sends it at once.
    pub(crate) async fn prepare(
        mut self,
        client: &deadpool_postgres::ClientWrapper,
    ) -> Result<Self, StoreError> {
        if self.prepared && self.statement.is_none() {
            let types: Vec<Type> = self.params.iter().map(|(_, ty)| ty.clone()).collect();
            let statement = client
                .prepare_typed_cached(&self.sql, &types)
                .await
                .map_err(StoreError::from_tokio_postgres)?;
            self.statement = Some(statement);
        }
        Ok(self)
    }

    fn values(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|(v, _)| &**v as &(dyn ToSql + Sync))
            .collect()
    }

    fn typed(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.params
            .iter()
            .map(|(v, ty)| (&**v as &(dyn ToSql + Sync), ty.clone()))
            .collect()
    }

    fn push(mut self, v: impl ToSql + Send + Sync + 'static, ty: Type) -> Self {
        self.params.push((Box::new(v), ty));
        self
    }

    /// The rows the statement returns, run on `client`.
    pub(crate) async fn rows(
        self,
        client: &deadpool_postgres::ClientWrapper,
    ) -> Result<Vec<TokioPgRow>, StoreError> {
        let q = self.prepare(client).await?;
        let rows = match &q.statement {
            Some(statement) => client.query(statement, &q.values()).await,
            None => client.query_typed(&q.sql, &q.typed()).await,
        };
        rows.map(|rows| rows.into_iter().map(TokioPgRow).collect())
            .map_err(StoreError::from_tokio_postgres)
    }

    /// The rows the statement changed, run on `client`. Prepared beforehand
    /// ([`TokioPgQuery::prepare`]), it is sent on the first poll, before anything is awaited.
    pub(crate) async fn changed(
        self,
        client: &deadpool_postgres::ClientWrapper,
    ) -> Result<u64, StoreError> {
        use futures_util::TryStreamExt;
        let q = self.prepare(client).await?;
        if let Some(statement) = &q.statement {
            return client
                .execute(statement, &q.values())
                .await
                .map_err(StoreError::from_tokio_postgres);
        }
        let stream = client
            .query_typed_raw(&q.sql, q.typed())
            .await
            .map_err(StoreError::from_tokio_postgres)?;
        futures_util::pin_mut!(stream);
        while stream
            .try_next()
            .await
            .map_err(StoreError::from_tokio_postgres)?
            .is_some()
        {}
        Ok(stream.rows_affected().unwrap_or(0))
    }
}

impl Args for TokioPgQuery {
    fn text(self, v: &str) -> Self {
        self.push(v.to_owned(), Type::TEXT)
    }
    fn opt_text(self, v: Option<&str>) -> Self {
        self.push(v.map(str::to_owned), Type::TEXT)
    }
    fn bytes(self, v: &[u8]) -> Self {
        self.push(v.to_vec(), Type::BYTEA)
    }
    fn opt_bytes(self, v: Option<&[u8]>) -> Self {
        self.push(v.map(<[u8]>::to_vec), Type::BYTEA)
    }
    fn int(self, v: i64) -> Self {
        self.push(v, Type::INT8)
    }
    fn count(self, v: u32) -> Self {
        self.push(i32::try_from(v).unwrap_or(i32::MAX), Type::INT4)
    }
    fn opt_int(self, v: Option<i64>) -> Self {
        self.push(v, Type::INT8)
    }
    fn flag(self, v: bool) -> Self {
        self.push(v, Type::BOOL)
    }
    fn texts(self, v: &[&str]) -> Self {
        let v: Vec<String> = v.iter().map(|s| (*s).to_owned()).collect();
        self.push(v, Type::TEXT_ARRAY)
    }
    fn opt_ids(self, v: Option<&[i64]>) -> Self {
        self.push(v.map(<[i64]>::to_vec), Type::INT8_ARRAY)
    }
}

impl PgArgs for TokioPgQuery {
    fn opt_texts(self, v: &[Option<&str>]) -> Self {
        let v: Vec<Option<String>> = v.iter().map(|s| s.map(str::to_owned)).collect();
        self.push(v, Type::TEXT_ARRAY)
    }
    fn byteas(self, v: &[&[u8]]) -> Self {
        let v: Vec<Vec<u8>> = v.iter().map(|b| b.to_vec()).collect();
        self.push(v, Type::BYTEA_ARRAY)
    }
    fn int4s(self, v: &[i32]) -> Self {
        self.push(v.to_vec(), Type::INT4_ARRAY)
    }
}

/// A row a statement returned.
#[derive(Debug)]
pub struct TokioPgRow(tokio_postgres::Row);

fn column(e: tokio_postgres::Error) -> StoreError {
    StoreError::from_tokio_postgres(e)
}

impl Columns for TokioPgRow {
    fn position(&self, name: &str) -> Result<usize, StoreError> {
        self.0
            .columns()
            .iter()
            .position(|c| c.name() == name)
            .ok_or_else(|| StoreError::Database(sqlx::Error::ColumnNotFound(name.to_owned())))
    }
    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.0.try_get(i).map_err(column)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        self.0.try_get(i).map_err(column)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>, StoreError> {
        self.0.try_get(i).map_err(column)
    }
    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.try_get(i).map_err(column)
    }
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.opt_int(i)?.ok_or_else(|| {
            StoreError::Database(sqlx::Error::ColumnDecode {
                index: i.to_string(),
                source: "an integer column is NULL".into(),
            })
        })
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        // tokio-postgres reads an integer only into a Rust type of its width, as sqlx does.
        if let Ok(v) = self.0.try_get::<_, Option<i64>>(i) {
            return Ok(v);
        }
        if let Ok(v) = self.0.try_get::<_, Option<i32>>(i) {
            return Ok(v.map(i64::from));
        }
        self.0
            .try_get::<_, Option<i16>>(i)
            .map(|v| v.map(i64::from))
            .map_err(column)
    }
    fn opt_real(&self, i: usize) -> Result<Option<f64>, StoreError> {
        if let Ok(v) = self.0.try_get::<_, Option<f64>>(i) {
            return Ok(v);
        }
        #[allow(clippy::cast_precision_loss, reason = "a figure, not an identity")]
        Ok(self.opt_int(i)?.map(|n| n as f64))
    }
    fn flag(&self, i: usize) -> Result<bool, StoreError> {
        self.0.try_get(i).map_err(column)
    }
    fn opt_flag(&self, i: usize) -> Result<Option<bool>, StoreError> {
        self.0.try_get(i).map_err(column)
    }
}

impl Engine for TokioPgStore {
    type Query = TokioPgQuery;
    type Row = TokioPgRow;

    fn queries(&self) -> &Queries {
        &self.queries
    }

    fn namespace(&self) -> &Namespace {
        &self.ns
    }

    fn migrations(&self) -> &'static [Migration] {
        crate::queries::MIGRATIONS
    }

    fn query(&self, sql: &Arc<str>) -> TokioPgQuery {
        TokioPgQuery::new(sql)
    }

    fn fresh(&self, sql: &Arc<str>) -> TokioPgQuery {
        TokioPgQuery::unprepared(sql)
    }

    fn key(q: TokioPgQuery, message_id: Option<&str>) -> TokioPgQuery {
        q.push(
            message_id.map(|id| message_key(id).into_owned()),
            Type::BYTEA,
        )
    }

    fn dead_letter_lock(
        q: TokioPgQuery,
        consumer: &ConsumerName,
        message_id: &str,
    ) -> TokioPgQuery {
        q.int(crate::key_lock::key_lock(consumer, message_id))
            .int(crate::key_lock::bucket_lock(consumer, message_id))
    }

    fn claimed(q: TokioPgQuery, env: &Envelope) -> TokioPgQuery {
        // The same 32 bits as a signed integer, the column's type.
        let fingerprint = env.hash().fingerprint().cast_signed();
        q.push(message_key(env.id().as_str()).into_owned(), Type::BYTEA)
            .push(fingerprint, Type::INT4)
    }

    fn stored_hash(row: &TokioPgRow, i: usize) -> Result<Option<StoredHash>, StoreError> {
        let fingerprint: Option<i32> = row.0.try_get(i).map_err(column)?;
        Ok(fingerprint.map(|f| StoredHash::Fingerprint(f.cast_unsigned())))
    }

    async fn execute(q: TokioPgQuery, conn: &mut Connection) -> Result<u64, StoreError> {
        q.changed(conn.client()).await
    }

    async fn execute_script(sql: &str, conn: &mut Connection) -> Result<(), StoreError> {
        conn.client()
            .batch_execute(sql)
            .await
            .map_err(StoreError::from_tokio_postgres)
    }

    async fn fetch_all(
        q: TokioPgQuery,
        conn: &mut Connection,
    ) -> Result<Vec<TokioPgRow>, StoreError> {
        q.rows(conn.client()).await
    }

    async fn fetch_alone(&self, q: TokioPgQuery) -> Result<Vec<TokioPgRow>, StoreError> {
        let conn = self.connection().await?;
        q.rows(conn.client()).await
    }

    async fn execute_alone(&self, q: TokioPgQuery) -> Result<u64, StoreError> {
        let conn = self.connection().await?;
        q.changed(conn.client()).await
    }

    async fn session(&self) -> Result<Connection, StoreError> {
        self.own_connection().await
    }

    async fn begin_write(&self) -> Result<Transaction, StoreError> {
        self.begin_with("BEGIN").await
    }
}
