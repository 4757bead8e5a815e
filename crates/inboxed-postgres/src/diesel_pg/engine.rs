//! What diesel-async gives the shared store layer: the store's SQL files as a query type of
//! their own, whose values diesel binds to the placeholders already in the text (prepared once
//! a connection by diesel-async's statement cache, the claims of stored rows planned anew each
//! time), and rows copied out of diesel's with their columns' names, read by their type's OID.

use std::sync::Arc;

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::row::{Field, NamedRow, Row};
use diesel::sql_types::{Array, BigInt, Binary, Bool, Integer, Nullable, Text, Untyped};
use diesel_async::RunQueryDsl;

use inboxed_core::engine::{Args, Columns, Engine};
use inboxed_core::migration::Migration;
use inboxed_core::sql::Queries;
use inboxed_core::{ConsumerName, Envelope, Namespace, StoreError, StoredHash};

use super::driver::{Connection, Transaction};
use super::store::DieselPgStore;
use crate::common::PgArgs;
use crate::key::message_key;

/// A value bound to a statement, in the PostgreSQL type sqlx would declare for it.
#[derive(Debug)]
enum Bind {
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
    Int8(Option<i64>),
    Int4(i32),
    Bool(bool),
    Texts(Vec<String>),
    OptTexts(Vec<Option<String>>),
    Int8s(Option<Vec<i64>>),
    Byteas(Vec<Vec<u8>>),
    Int4s(Vec<i32>),
}

/// A statement of the store's SQL files with its values.
#[derive(Debug)]
pub struct DieselQuery {
    sql: Arc<str>,
    binds: Vec<Bind>,
    /// Prepared once a connection and kept (`false`: planned anew each time).
    cached: bool,
}

impl DieselQuery {
    fn new(sql: &Arc<str>, cached: bool) -> Self {
        Self {
            sql: Arc::clone(sql),
            binds: Vec::new(),
            cached,
        }
    }

    fn push(mut self, bind: Bind) -> Self {
        self.binds.push(bind);
        self
    }
}

impl QueryFragment<Pg> for DieselQuery {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> diesel::QueryResult<()> {
        if !self.cached {
            out.unsafe_to_cache_prepared();
        }
        out.push_sql(&self.sql);
        for bind in &self.binds {
            match bind {
                Bind::Text(v) => out.push_bind_param_value_only::<Nullable<Text>, _>(v)?,
                Bind::Bytes(v) => out.push_bind_param_value_only::<Nullable<Binary>, _>(v)?,
                Bind::Int8(v) => out.push_bind_param_value_only::<Nullable<BigInt>, _>(v)?,
                Bind::Int4(v) => out.push_bind_param_value_only::<Integer, _>(v)?,
                Bind::Bool(v) => out.push_bind_param_value_only::<Bool, _>(v)?,
                Bind::Texts(v) => out.push_bind_param_value_only::<Array<Text>, _>(v)?,
                Bind::OptTexts(v) => {
                    out.push_bind_param_value_only::<Array<Nullable<Text>>, _>(v)?;
                }
                Bind::Int8s(v) => {
                    out.push_bind_param_value_only::<Nullable<Array<BigInt>>, _>(v)?;
                }
                Bind::Byteas(v) => out.push_bind_param_value_only::<Array<Binary>, _>(v)?,
                Bind::Int4s(v) => out.push_bind_param_value_only::<Array<Integer>, _>(v)?,
            }
        }
        Ok(())
    }
}

impl QueryId for DieselQuery {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for DieselQuery {
    type SqlType = Untyped;
}

impl diesel::query_dsl::RunQueryDslSupport for DieselQuery {}

impl Args for DieselQuery {
    fn text(self, v: &str) -> Self {
        self.push(Bind::Text(Some(v.to_owned())))
    }
    fn opt_text(self, v: Option<&str>) -> Self {
        self.push(Bind::Text(v.map(str::to_owned)))
    }
    fn bytes(self, v: &[u8]) -> Self {
        self.push(Bind::Bytes(Some(v.to_vec())))
    }
    fn opt_bytes(self, v: Option<&[u8]>) -> Self {
        self.push(Bind::Bytes(v.map(<[u8]>::to_vec)))
    }
    fn int(self, v: i64) -> Self {
        self.push(Bind::Int8(Some(v)))
    }
    fn count(self, v: u32) -> Self {
        self.push(Bind::Int4(i32::try_from(v).unwrap_or(i32::MAX)))
    }
    fn opt_int(self, v: Option<i64>) -> Self {
        self.push(Bind::Int8(v))
    }
    fn flag(self, v: bool) -> Self {
        self.push(Bind::Bool(v))
    }
    fn texts(self, v: &[&str]) -> Self {
        self.push(Bind::Texts(v.iter().map(|s| (*s).to_owned()).collect()))
    }
    fn opt_ids(self, v: Option<&[i64]>) -> Self {
        self.push(Bind::Int8s(v.map(<[i64]>::to_vec)))
    }
}

impl PgArgs for DieselQuery {
    fn opt_texts(self, v: &[Option<&str>]) -> Self {
        self.push(Bind::OptTexts(
            v.iter().map(|s| s.map(str::to_owned)).collect(),
        ))
    }
    fn byteas(self, v: &[&[u8]]) -> Self {
        self.push(Bind::Byteas(v.iter().map(|b| b.to_vec()).collect()))
    }
    fn int4s(self, v: &[i32]) -> Self {
        self.push(Bind::Int4s(v.to_vec()))
    }
}

/// A row a statement returned, its columns copied out of diesel's row: each column's name,
/// and its type's OID and bytes in PostgreSQL's binary format (`None`: NULL).
#[derive(Debug)]
pub struct DieselRow {
    names: Vec<Option<String>>,
    values: Vec<Option<(u32, Vec<u8>)>>,
}

impl diesel::deserialize::QueryableByName<Pg> for DieselRow {
    fn build<'a>(row: &impl NamedRow<'a, Pg>) -> diesel::deserialize::Result<Self> {
        let n = Row::field_count(row);
        let mut names = Vec::with_capacity(n);
        let mut values = Vec::with_capacity(n);
        for i in 0..n {
            let field = Row::get(row, i).ok_or("a column the row counted is missing")?;
            names.push(field.field_name().map(str::to_owned));
            values.push(
                field
                    .value()
                    .map(|v| (v.get_oid().get(), v.as_bytes().to_vec())),
            );
        }
        Ok(Self { names, values })
    }
}

// PostgreSQL's type OIDs of the columns the store's statements return.
const BOOL: u32 = 16;
const BYTEA: u32 = 17;
const NAME: u32 = 19;
const INT8: u32 = 20;
const INT2: u32 = 21;
const INT4: u32 = 23;
const TEXT: u32 = 25;
const FLOAT8: u32 = 701;
const VARCHAR: u32 = 1043;

fn decode(i: usize, why: &str) -> StoreError {
    StoreError::Database(sqlx::Error::ColumnDecode {
        index: i.to_string(),
        source: why.into(),
    })
}

impl DieselRow {
    /// Column `i`: its OID and bytes, or `None` for NULL.
    fn raw(&self, i: usize) -> Result<Option<(u32, &[u8])>, StoreError> {
        match self.values.get(i) {
            Some(v) => Ok(v.as_ref().map(|(oid, bytes)| (*oid, bytes.as_slice()))),
            None => Err(StoreError::Database(sqlx::Error::ColumnIndexOutOfBounds {
                index: i,
                len: self.values.len(),
            })),
        }
    }

    fn fixed<const N: usize>(i: usize, bytes: &[u8]) -> Result<[u8; N], StoreError> {
        bytes
            .try_into()
            .map_err(|_| decode(i, "a fixed-width column of another width"))
    }
}

impl Columns for DieselRow {
    fn position(&self, name: &str) -> Result<usize, StoreError> {
        self.names
            .iter()
            .position(|n| n.as_deref() == Some(name))
            .ok_or_else(|| StoreError::Database(sqlx::Error::ColumnNotFound(name.to_owned())))
    }
    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.opt_text(i)?
            .ok_or_else(|| decode(i, "a text column is NULL"))
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.raw(i)? {
            None => Ok(None),
            Some((TEXT | VARCHAR | NAME, bytes)) => String::from_utf8(bytes.to_vec())
                .map(Some)
                .map_err(|_| decode(i, "text that is not UTF-8")),
            Some(_) => Err(decode(i, "not a text column")),
        }
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>, StoreError> {
        self.opt_bytes(i)?
            .ok_or_else(|| decode(i, "a bytes column is NULL"))
    }
    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>, StoreError> {
        match self.raw(i)? {
            None => Ok(None),
            Some((BYTEA, bytes)) => Ok(Some(bytes.to_vec())),
            Some(_) => Err(decode(i, "not a bytea column")),
        }
    }
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.opt_int(i)?
            .ok_or_else(|| decode(i, "an integer column is NULL"))
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.raw(i)? {
            None => Ok(None),
            Some((INT8, b)) => Ok(Some(i64::from_be_bytes(Self::fixed(i, b)?))),
            Some((INT4, b)) => Ok(Some(i64::from(i32::from_be_bytes(Self::fixed(i, b)?)))),
            Some((INT2, b)) => Ok(Some(i64::from(i16::from_be_bytes(Self::fixed(i, b)?)))),
            Some(_) => Err(decode(i, "not an integer column")),
        }
    }
    fn opt_real(&self, i: usize) -> Result<Option<f64>, StoreError> {
        match self.raw(i)? {
            Some((FLOAT8, b)) => Ok(Some(f64::from_be_bytes(Self::fixed(i, b)?))),
            #[allow(clippy::cast_precision_loss, reason = "a figure, not an identity")]
            _ => Ok(self.opt_int(i)?.map(|n| n as f64)),
        }
    }
    fn flag(&self, i: usize) -> Result<bool, StoreError> {
        self.opt_flag(i)?
            .ok_or_else(|| decode(i, "a boolean column is NULL"))
    }
    fn opt_flag(&self, i: usize) -> Result<Option<bool>, StoreError> {
        match self.raw(i)? {
            None => Ok(None),
            Some((BOOL, [b])) => Ok(Some(*b != 0)),
            Some(_) => Err(decode(i, "not a boolean column")),
        }
    }
}

fn failed(e: diesel::result::Error) -> StoreError {
    StoreError::from_diesel(e)
}

impl Engine for DieselPgStore {
    type Query = DieselQuery;
    type Row = DieselRow;

    fn queries(&self) -> &Queries {
        &self.queries
    }

    fn namespace(&self) -> &Namespace {
        &self.ns
    }

    fn migrations(&self) -> &'static [Migration] {
        crate::queries::MIGRATIONS
    }

    fn query(&self, sql: &Arc<str>) -> DieselQuery {
        DieselQuery::new(sql, true)
    }

    fn fresh(&self, sql: &Arc<str>) -> DieselQuery {
        DieselQuery::new(sql, false)
    }

    fn key(q: DieselQuery, message_id: Option<&str>) -> DieselQuery {
        q.push(Bind::Bytes(
            message_id.map(|id| message_key(id).into_owned()),
        ))
    }

    fn dead_letter_lock(q: DieselQuery, consumer: &ConsumerName, message_id: &str) -> DieselQuery {
        q.int(crate::key_lock::key_lock(consumer, message_id))
            .int(crate::key_lock::bucket_lock(consumer, message_id))
    }

    fn claimed(q: DieselQuery, env: &Envelope) -> DieselQuery {
        // The same 32 bits as a signed integer, the column's type.
        let fingerprint = env.hash().fingerprint().cast_signed();
        q.push(Bind::Bytes(Some(
            message_key(env.id().as_str()).into_owned(),
        )))
        .push(Bind::Int4(fingerprint))
    }

    fn stored_hash(row: &DieselRow, i: usize) -> Result<Option<StoredHash>, StoreError> {
        let fingerprint = row.opt_int(i)?;
        Ok(fingerprint.map(|f| {
            let f = i32::try_from(f).unwrap_or_default();
            StoredHash::Fingerprint(f.cast_unsigned())
        }))
    }

    async fn execute(q: DieselQuery, conn: &mut Connection) -> Result<u64, StoreError> {
        let n = q.execute(&mut **conn).await.map_err(failed)?;
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    async fn execute_script(sql: &str, conn: &mut Connection) -> Result<(), StoreError> {
        use diesel_async::SimpleAsyncConnection;
        conn.batch_execute(sql).await.map_err(failed)
    }

    async fn fetch_all(
        q: DieselQuery,
        conn: &mut Connection,
    ) -> Result<Vec<DieselRow>, StoreError> {
        q.load::<DieselRow>(&mut **conn).await.map_err(failed)
    }

    async fn fetch_alone(&self, q: DieselQuery) -> Result<Vec<DieselRow>, StoreError> {
        let mut conn = self.connection().await?;
        Self::fetch_all(q, &mut conn).await
    }

    async fn execute_alone(&self, q: DieselQuery) -> Result<u64, StoreError> {
        let mut conn = self.connection().await?;
        Self::execute(q, &mut conn).await
    }

    async fn session(&self) -> Result<Connection, StoreError> {
        self.own_connection().await
    }

    async fn begin_write(&self) -> Result<Transaction, StoreError> {
        self.begin_with("BEGIN").await
    }
}
