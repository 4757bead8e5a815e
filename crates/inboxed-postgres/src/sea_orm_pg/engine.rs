//! What SeaORM gives the shared store layer: the store's SQL files as SeaORM statements with
//! their values, run through SeaORM's own statement API inside its transaction and through the
//! sqlx beneath it otherwise (bound by sea-query-sqlx, as SeaORM binds them), and its rows read
//! as sqlx's.

use std::sync::Arc;

use sea_orm::sea_query::{ArrayType, Value, Values};
use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Statement};
use sea_query_sqlx::SqlxValues;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Postgres};

use inboxed_core::engine::{Args, Columns, Engine};
use inboxed_core::migration::Migration;
use inboxed_core::sql::Queries;
use inboxed_core::{ConsumerName, Envelope, Namespace, StoreError, StoredHash};

use super::driver::{Connection, Transaction};
use super::store::SeaOrmPgStore;
use crate::common::PgArgs;
use crate::inline::{self, Inline};
use crate::key::message_key;

/// A statement of the store's SQL files with its values.
#[derive(Debug)]
pub struct SeaQuery {
    sql: Arc<str>,
    values: Vec<Value>,
    /// Prepared once a connection and planned as PostgreSQL likes (`false`: planned for its
    /// values each time).
    cached: bool,
}

impl SeaQuery {
    fn new(sql: &Arc<str>, cached: bool) -> Self {
        Self {
            sql: Arc::clone(sql),
            values: Vec::new(),
            cached,
        }
    }

    fn push(mut self, value: Value) -> Self {
        self.values.push(value);
        self
    }

    /// A statement SeaORM built, to run on the sqlx beneath it (prepared and kept).
    pub(crate) fn from_statement(stmt: Statement) -> Self {
        Self {
            sql: Arc::from(stmt.sql),
            values: stmt.values.map(|v| v.0).unwrap_or_default(),
            cached: true,
        }
    }

    pub(crate) fn cached(&self) -> bool {
        self.cached
    }

    /// The statement as SeaORM runs it.
    pub(crate) fn statement(self) -> Statement {
        Statement::from_sql_and_values(DbBackend::Postgres, &*self.sql, self.values)
    }

    /// The statement on its own, on the sqlx beneath SeaORM: planned for its values, it goes
    /// as text with them written in (one round trip, as `PgStore`'s claims: [`crate::inline`]).
    fn inline(&self) -> Option<Inline> {
        if self.cached {
            return None;
        }
        self.values
            .iter()
            .try_fold(Inline::new(&self.sql), |q, v| Some(q.push(literal(v)?)))
    }

    /// The statement on the sqlx beneath SeaORM, its values bound as SeaORM binds them.
    pub(crate) fn sqlx(self) -> sqlx::query::Query<'static, Postgres, SqlxValues> {
        sqlx::query_with(AssertSqlSafe(self.sql), SqlxValues(Values(self.values)))
            .persistent(self.cached)
    }
}

/// A value as [`Inline`] writes it in: the kinds [`SeaQuery`]'s arguments bind.
fn literal(v: &Value) -> Option<inline::Value> {
    fn each<T>(v: &[Value], item: impl Fn(&Value) -> Option<T>) -> Option<Vec<T>> {
        v.iter().map(item).collect()
    }
    Some(match v {
        Value::String(s) => inline::Value::Text(s.clone()),
        Value::Bytes(b) => inline::Value::Bytes(b.clone()),
        Value::BigInt(n) => inline::Value::Int8(*n),
        Value::Int(n) => inline::Value::Int4(*n),
        Value::Bool(Some(b)) => inline::Value::Bool(*b),
        Value::Array(ArrayType::String, Some(v)) => inline::Value::Texts(each(v, |v| match v {
            Value::String(s) => Some(s.clone()),
            _ => None,
        })?),
        Value::Array(ArrayType::BigInt, v) => inline::Value::Int8s(match v {
            Some(v) => Some(each(v, |v| match v {
                Value::BigInt(n) => *n,
                _ => None,
            })?),
            None => None,
        }),
        Value::Array(ArrayType::Bytes, Some(v)) => inline::Value::Byteas(each(v, |v| match v {
            Value::Bytes(b) => b.clone(),
            _ => None,
        })?),
        Value::Array(ArrayType::Int, Some(v)) => inline::Value::Int4s(each(v, |v| match v {
            Value::Int(n) => *n,
            _ => None,
        })?),
        _ => return None,
    })
}

fn array(ty: ArrayType, values: Vec<Value>) -> Value {
    Value::Array(ty, Some(Box::new(values)))
}

/// PostgreSQL's text form of a `text[]` whose elements may be NULL: sea-query binds an array
/// only as a whole vector of present values, so such an array travels as text that the
/// statement casts (`$n::text[]`). Every element is quoted, with `\` and `"` escaped, which
/// is all the array input syntax asks of a quoted element.
fn array_literal(v: &[Option<&str>]) -> String {
    let mut out = String::from("{");
    for (i, element) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match element {
            None => out.push_str("NULL"),
            Some(s) => {
                out.push('"');
                for c in s.chars() {
                    if matches!(c, '\\' | '"') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out.push('"');
            }
        }
    }
    out.push('}');
    out
}

impl Args for SeaQuery {
    fn text(self, v: &str) -> Self {
        self.push(Value::String(Some(v.to_owned())))
    }
    fn opt_text(self, v: Option<&str>) -> Self {
        self.push(Value::String(v.map(str::to_owned)))
    }
    fn bytes(self, v: &[u8]) -> Self {
        self.push(Value::Bytes(Some(v.to_vec())))
    }
    fn opt_bytes(self, v: Option<&[u8]>) -> Self {
        self.push(Value::Bytes(v.map(<[u8]>::to_vec)))
    }
    fn int(self, v: i64) -> Self {
        self.push(Value::BigInt(Some(v)))
    }
    fn count(self, v: u32) -> Self {
        self.push(Value::Int(Some(i32::try_from(v).unwrap_or(i32::MAX))))
    }
    fn opt_int(self, v: Option<i64>) -> Self {
        self.push(Value::BigInt(v))
    }
    fn flag(self, v: bool) -> Self {
        self.push(Value::Bool(Some(v)))
    }
    fn texts(self, v: &[&str]) -> Self {
        let v = v.iter().map(|s| Value::String(Some((*s).to_owned())));
        self.push(array(ArrayType::String, v.collect()))
    }
    fn opt_ids(self, v: Option<&[i64]>) -> Self {
        self.push(match v {
            Some(v) => array(
                ArrayType::BigInt,
                v.iter().map(|n| Value::BigInt(Some(*n))).collect(),
            ),
            None => Value::Array(ArrayType::BigInt, None),
        })
    }
}

impl PgArgs for SeaQuery {
    fn opt_texts(self, v: &[Option<&str>]) -> Self {
        self.push(Value::String(Some(array_literal(v))))
    }
    fn byteas(self, v: &[&[u8]]) -> Self {
        let v = v.iter().map(|b| Value::Bytes(Some(b.to_vec())));
        self.push(array(ArrayType::Bytes, v.collect()))
    }
    fn int4s(self, v: &[i32]) -> Self {
        let v = v.iter().map(|n| Value::Int(Some(*n)));
        self.push(array(ArrayType::Int, v.collect()))
    }
}

/// A row a statement returned: SeaORM's, which holds sqlx's row, read as the sqlx store reads
/// its own.
#[derive(Debug)]
pub struct SeaRow(QueryResult);

impl From<QueryResult> for SeaRow {
    fn from(row: QueryResult) -> Self {
        Self(row)
    }
}

impl From<PgRow> for SeaRow {
    fn from(row: PgRow) -> Self {
        Self(row.into())
    }
}

impl SeaRow {
    fn pg(&self) -> Result<&PgRow, StoreError> {
        self.0.try_as_pg_row().ok_or_else(|| {
            StoreError::Database(sqlx::Error::Protocol(
                "a SeaORM row that is not PostgreSQL's".to_owned(),
            ))
        })
    }
}

impl Columns for SeaRow {
    fn position(&self, name: &str) -> Result<usize, StoreError> {
        self.pg()?.position(name)
    }
    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.pg()?.text(i)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        self.pg()?.opt_text(i)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>, StoreError> {
        self.pg()?.bytes(i)
    }
    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>, StoreError> {
        self.pg()?.opt_bytes(i)
    }
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.pg()?.int(i)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        self.pg()?.opt_int(i)
    }
    fn opt_real(&self, i: usize) -> Result<Option<f64>, StoreError> {
        self.pg()?.opt_real(i)
    }
    fn flag(&self, i: usize) -> Result<bool, StoreError> {
        self.pg()?.flag(i)
    }
    fn opt_flag(&self, i: usize) -> Result<Option<bool>, StoreError> {
        self.pg()?.opt_flag(i)
    }
}

impl Engine for SeaOrmPgStore {
    type Query = SeaQuery;
    type Row = SeaRow;

    fn queries(&self) -> &Queries {
        &self.queries
    }

    fn namespace(&self) -> &Namespace {
        &self.ns
    }

    fn migrations(&self) -> &'static [Migration] {
        crate::queries::MIGRATIONS
    }

    fn query(&self, sql: &Arc<str>) -> SeaQuery {
        SeaQuery::new(sql, true)
    }

    fn fresh(&self, sql: &Arc<str>) -> SeaQuery {
        SeaQuery::new(sql, false)
    }

    fn key(q: SeaQuery, message_id: Option<&str>) -> SeaQuery {
        q.push(Value::Bytes(
            message_id.map(|id| message_key(id).into_owned()),
        ))
    }

    fn dead_letter_lock(q: SeaQuery, consumer: &ConsumerName, message_id: &str) -> SeaQuery {
        q.int(crate::key_lock::key_lock(consumer, message_id))
            .int(crate::key_lock::bucket_lock(consumer, message_id))
    }

    fn claimed(q: SeaQuery, env: &Envelope) -> SeaQuery {
        // The same 32 bits as a signed integer, the column's type.
        let fingerprint = env.hash().fingerprint().cast_signed();
        q.push(Value::Bytes(Some(
            message_key(env.id().as_str()).into_owned(),
        )))
        .push(Value::Int(Some(fingerprint)))
    }

    fn stored_hash(row: &SeaRow, i: usize) -> Result<Option<StoredHash>, StoreError> {
        let fingerprint = row.opt_int(i)?;
        Ok(fingerprint.map(|f| {
            let f = i32::try_from(f).unwrap_or_default();
            StoredHash::Fingerprint(f.cast_unsigned())
        }))
    }

    async fn execute(q: SeaQuery, conn: &mut Connection) -> Result<u64, StoreError> {
        conn.run(q).await
    }

    async fn execute_script(sql: &str, conn: &mut Connection) -> Result<(), StoreError> {
        conn.execute_unprepared(sql)
            .await
            .map(drop)
            .map_err(StoreError::from_sea_orm)
    }

    async fn fetch_all(q: SeaQuery, conn: &mut Connection) -> Result<Vec<SeaRow>, StoreError> {
        conn.rows(q).await
    }

    async fn fetch_alone(&self, q: SeaQuery) -> Result<Vec<SeaRow>, StoreError> {
        let rows = match q.inline() {
            Some(inline) => inline.fetch_all(&self.pool).await?,
            None => q
                .sqlx()
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::from_sqlx)?,
        };
        Ok(rows.into_iter().map(SeaRow::from).collect())
    }

    async fn execute_alone(&self, q: SeaQuery) -> Result<u64, StoreError> {
        if let Some(inline) = q.inline() {
            return inline.execute(&self.pool).await;
        }
        let done = q
            .sqlx()
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(done.rows_affected())
    }

    async fn session(&self) -> Result<Connection, StoreError> {
        self.own_session().await
    }

    async fn begin_write(&self) -> Result<Transaction, StoreError> {
        self.begin_with("BEGIN").await
    }
}

#[cfg(test)]
mod tests {
    use super::array_literal;

    #[test]
    fn array_literal_quotes_every_element() {
        assert_eq!(
            array_literal(&[Some("a"), None, Some("b\"c\\d"), Some("NULL"), Some("")]),
            r#"{"a",NULL,"b\"c\\d","NULL",""}"#
        );
        assert_eq!(array_literal(&[]), "{}");
    }
}
