//! The store layer every engine shares: the Rust around the SQL (which statement an operation
//! runs, what it binds, how it reads the rows, what the outcome is), written once over
//! [`Engine`]. An engine crate provides its SQL files, its migrations, and an [`Engine`]: its
//! statement, row and connection types, and the few things that truly differ (how a list is
//! bound, how wide an integer is, how a statement runs on its own, which form a key takes).
//!
//! Why a trait of primitives rather than code generic over sqlx's `Database`: generic code
//! must repeat, on every function, that each type it binds or reads is encodable and
//! decodable for that database (a dozen `for<'q>` bounds), and the engines differ exactly
//! there (PostgreSQL binds an array where SQLite binds JSON text; counts are `int4` in one,
//! `INTEGER` in the other). Here the engine answers those questions once, in concrete types,
//! and the shared code reads like the engine code it replaces: `.text(consumer).texts(ids)`.
//! A macro expanding the glue per engine would do the same with less type checking and
//! errors reported far from their cause.

pub mod claims;
pub mod inbox;
pub mod keys;
pub mod liveness;
pub mod migrate;
pub mod observe;
pub mod operate;
pub mod outbox;
pub mod pool;
pub mod retention;

use std::future::Future;
use std::sync::Arc;

use crate::driver::Driver;
use crate::envelope::{ConsumerName, Envelope};
use crate::error::StoreError;
use crate::hash::StoredHash;
use crate::migration::Migration;
use crate::namespace::Namespace;
use crate::sql::Queries;
use crate::store::Store;

/// A statement with the arguments bound so far, bound in the engine's own types. Values are
/// copied into the statement: a statement that borrowed them would make the shared
/// operations' futures generic over a lifetime, which the compiler cannot yet prove `Send`
/// (rust-lang/rust#100013), and a copy costs little beside a round trip.
pub trait Args: Sized + Send {
    /// A string.
    #[must_use]
    fn text(self, v: &str) -> Self;
    /// A string, or NULL.
    #[must_use]
    fn opt_text(self, v: Option<&str>) -> Self;
    /// Bytes.
    #[must_use]
    fn bytes(self, v: &[u8]) -> Self;
    /// Bytes, or NULL.
    #[must_use]
    fn opt_bytes(self, v: Option<&[u8]>) -> Self;
    /// A 64-bit integer.
    #[must_use]
    fn int(self, v: i64) -> Self;
    /// A count (attempts, a limit of attempts): a column of the engine's usual integer width
    /// (PostgreSQL `int4`, saturated; SQLite `INTEGER`).
    #[must_use]
    fn count(self, v: u32) -> Self;
    /// A 64-bit integer, or NULL.
    #[must_use]
    fn opt_int(self, v: Option<i64>) -> Self;
    /// A boolean.
    #[must_use]
    fn flag(self, v: bool) -> Self;
    /// A list of strings (PostgreSQL `text[]`; SQLite a JSON array as text).
    #[must_use]
    fn texts(self, v: &[&str]) -> Self;
    /// A list of row ids (PostgreSQL `int8[]`; SQLite a JSON array as text), or NULL.
    #[must_use]
    fn opt_ids(self, v: Option<&[i64]>) -> Self;

    /// A list of row ids.
    #[must_use]
    fn ids(self, v: &[i64]) -> Self {
        self.opt_ids(Some(v))
    }
}

/// A row read by a statement, its columns by position (found by name where a statement's
/// readers name them); every sqlx row whose database reads
/// these types is one (the blanket implementation below is the one place that names them).
pub trait Columns: Send {
    /// The position of the column named `name` (the observation rows are read by name).
    ///
    /// # Errors
    /// No column of that name.
    fn position(&self, name: &str) -> Result<usize, StoreError>;
    /// A string column.
    ///
    /// # Errors
    /// The column is missing or of another type.
    fn text(&self, i: usize) -> Result<String, StoreError>;
    /// A nullable string column.
    ///
    /// # Errors
    /// The column is missing or of another type.
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError>;
    /// A bytes column.
    ///
    /// # Errors
    /// The column is missing, NULL or of another type.
    fn bytes(&self, i: usize) -> Result<Vec<u8>, StoreError>;
    /// A nullable bytes column.
    ///
    /// # Errors
    /// The column is missing or of another type.
    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>, StoreError>;
    /// An integer column of any width.
    ///
    /// # Errors
    /// The column is missing or not an integer.
    fn int(&self, i: usize) -> Result<i64, StoreError>;
    /// A nullable integer column of any width.
    ///
    /// # Errors
    /// The column is missing or not an integer.
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError>;
    /// A nullable number column, floating or integer (a figure one engine computes as
    /// `float8` and another as `INTEGER`).
    ///
    /// # Errors
    /// The column is missing or not a number.
    fn opt_real(&self, i: usize) -> Result<Option<f64>, StoreError>;
    /// A boolean column.
    ///
    /// # Errors
    /// The column is missing or not a boolean.
    fn flag(&self, i: usize) -> Result<bool, StoreError>;
    /// A nullable boolean column.
    ///
    /// # Errors
    /// The column is missing or not a boolean.
    fn opt_flag(&self, i: usize) -> Result<Option<bool>, StoreError>;

    /// A count column: negative reads as 0, beyond `u32` as `u32::MAX`.
    ///
    /// # Errors
    /// The column is missing or not an integer.
    fn count(&self, i: usize) -> Result<u32, StoreError> {
        Ok(u32::try_from(self.int(i)?.max(0)).unwrap_or(u32::MAX))
    }
}

impl<R> Columns for R
where
    R: sqlx::Row + Send,
    usize: sqlx::ColumnIndex<R>,
    for<'n> &'n str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i32: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> f64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn position(&self, name: &str) -> Result<usize, StoreError> {
        use sqlx::Column;
        self.try_column(name)
            .map(Column::ordinal)
            .map_err(StoreError::from_sqlx)
    }
    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.try_get(i).map_err(StoreError::from_sqlx)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        self.try_get(i).map_err(StoreError::from_sqlx)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>, StoreError> {
        self.try_get(i)
            .or_else(|e| escaped_bytea(self, i).ok_or(e))
            .map_err(StoreError::from_sqlx)
    }
    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>, StoreError> {
        self.try_get(i)
            .or_else(|e| escaped_bytea(self, i).map(Some).ok_or(e))
            .map_err(StoreError::from_sqlx)
    }
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        // sqlx decodes an integer only into a Rust type of its width (PostgreSQL's int4 into
        // i32); SQLite's integers are all i64.
        self.try_get::<i64, _>(i)
            .or_else(|_| self.try_get::<i32, _>(i).map(i64::from))
            .map_err(StoreError::from_sqlx)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        self.try_get::<Option<i64>, _>(i)
            .or_else(|_| self.try_get::<Option<i32>, _>(i).map(|v| v.map(i64::from)))
            .map_err(StoreError::from_sqlx)
    }
    fn opt_real(&self, i: usize) -> Result<Option<f64>, StoreError> {
        if let Ok(v) = self.try_get::<Option<f64>, _>(i) {
            return Ok(v);
        }
        #[allow(clippy::cast_precision_loss, reason = "a figure, not an identity")]
        Ok(self.opt_int(i)?.map(|n| n as f64))
    }
    fn flag(&self, i: usize) -> Result<bool, StoreError> {
        self.try_get(i).map_err(StoreError::from_sqlx)
    }
    fn opt_flag(&self, i: usize) -> Result<Option<bool>, StoreError> {
        self.try_get(i).map_err(StoreError::from_sqlx)
    }
}

/// A bytea column that PostgreSQL sent as text in its `escape` form (a row of a statement sent
/// by the simple-query protocol, on a server with `bytea_output = escape`; sqlx reads only the
/// `hex` form): `\\` for a backslash, `\ooo` in octal for a byte that is not printable ASCII.
/// `None` when the column is not a bytea, or not such text.
fn escaped_bytea<R>(row: &R, i: usize) -> Option<Vec<u8>>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database>,
{
    use sqlx::{Column, TypeInfo};
    if row.try_column(i).ok()?.type_info().name() != "BYTEA" {
        return None;
    }
    let text: String = row.try_get_unchecked(i).ok()?;
    let text = text.as_bytes();
    let mut out = Vec::with_capacity(text.len());
    let mut k = 0;
    while k < text.len() {
        if text[k] != b'\\' {
            out.push(text[k]);
            k += 1;
        } else if text.get(k + 1) == Some(&b'\\') {
            out.push(b'\\');
            k += 2;
        } else {
            let octal = text.get(k + 1..k + 4)?;
            if !octal.iter().all(|d| (b'0'..=b'7').contains(d)) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(octal).ok()?, 8).ok()?);
            k += 4;
        }
    }
    Some(out)
}

/// The connection type of an engine's database.
pub type Conn<E> = <<E as Store>::Db as Driver>::Connection;

/// What an engine provides to the shared store layer: its types, its rendered SQL, how a
/// statement runs in the caller's transaction and on its own, and the forms that differ.
///
/// Implemented by the engine's store (`PgStore`, `SqliteStore`, `MySqlStore`), which is its
/// own [`Store::Engine`]; like [`Store`], not meant to be implemented outside this workspace.
pub trait Engine: Store {
    /// A statement with its arguments.
    type Query: Args;
    /// A row a statement returned (the driver's own, or a copy of it).
    type Row: Columns;

    /// This store's statements, rendered for its namespace.
    fn queries(&self) -> &Queries;

    /// This store's schema and prefix.
    fn namespace(&self) -> &Namespace;

    /// The engine's migrations ([`migrations!`](crate::migrations)).
    fn migrations(&self) -> &'static [Migration];

    /// The statement `sql`, to bind arguments to.
    fn query(&self, sql: &Arc<str>) -> Self::Query;

    /// The statement `sql`, not kept prepared where the engine would keep it: planned anew
    /// each time. For the claims, which run over and over on a table that swings from empty
    /// to a backlog and back (PostgreSQL's generic plan, made on the empty table, read the
    /// whole table a claim), and for statements run once a deploy (the migrations), which
    /// need not be cached. By default [`Engine::query`].
    fn fresh(&self, sql: &Arc<str>) -> Self::Query {
        self.query(sql)
    }

    /// Binds the stored form of a key of the processed-keys table when the engine's statements
    /// take one (PostgreSQL stores a key derived from the id; SQLite the id itself, already
    /// bound): `None` when there is no message id.
    fn key(q: Self::Query, message_id: Option<&str>) -> Self::Query;

    /// Binds the ids of the locks a dead letter takes on its key before it checks for a
    /// processed row (`dead_letter_lock.sql`): PostgreSQL's advisory lock ids, computed in
    /// the engine (`inboxed_postgres::key_lock` says why). Only called where the engine has
    /// the statement; by default binds nothing.
    fn dead_letter_lock(q: Self::Query, consumer: &ConsumerName, message_id: &str) -> Self::Query {
        let _ = (consumer, message_id);
        q
    }

    /// Binds what a processor's claim stores of a message after its consumer and id (the
    /// statement `claim.sql`): PostgreSQL its derived key and the payload's 32-bit
    /// fingerprint, SQLite its type, correlation id and full payload hash.
    fn claimed(q: Self::Query, envelope: &Envelope) -> Self::Query;

    /// Reads the payload hash a processed key keeps (column `i` of `lookup.sql`), in the form
    /// [`Engine::claimed`] stored it.
    ///
    /// # Errors
    /// The column is missing or of another type.
    fn stored_hash(row: &Self::Row, i: usize) -> Result<Option<StoredHash>, StoreError>;

    /// Runs `q` in the caller's transaction; the rows it changed.
    fn execute(
        q: Self::Query,
        conn: &mut Conn<Self>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Runs a script of one or more statements without arguments (a migration) in the
    /// caller's transaction.
    fn execute_script(
        sql: &str,
        conn: &mut Conn<Self>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Runs `q` in the caller's transaction; the rows it returned.
    fn fetch_all(
        q: Self::Query,
        conn: &mut Conn<Self>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, StoreError>> + Send;

    /// Runs `q` committed on its own; the rows it returned.
    fn fetch_alone(
        &self,
        q: Self::Query,
    ) -> impl Future<Output = Result<Vec<Self::Row>, StoreError>> + Send;

    /// [`Engine::fetch_alone`], waiting at most `wait` for a lock that another transaction
    /// holds where the engine's statement waits for one: SQLite's write lock, which a hung
    /// delivery's transaction may hold. A server's statement committed on its own waits for no
    /// other delivery's transaction, so by default `wait` is not needed.
    fn fetch_alone_within(
        &self,
        q: Self::Query,
        wait: std::time::Duration,
    ) -> impl Future<Output = Result<Vec<Self::Row>, StoreError>> + Send {
        let _ = wait;
        self.fetch_alone(q)
    }

    /// Runs `q` committed on its own; the rows it changed.
    fn execute_alone(&self, q: Self::Query)
    -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// A connection of its own, outside the pool, with the pool's connect options: for a lock
    /// that lives as long as its session ([`liveness`]), which a pooled connection would carry
    /// on to its next user. Engines without session locks never ask for one.
    fn session(&self) -> impl Future<Output = Result<Conn<Self>, StoreError>> + Send;

    /// Begins a transaction of the store's own that will write (SQLite takes its write lock
    /// at the start).
    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<<Self::Db as Driver>::Transaction, StoreError>> + Send;
}
