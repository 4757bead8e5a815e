//! A statement sent as text with its values written in: the claims, in one round trip and
//! planned for their values.
//!
//! The claims must be planned anew each time: PostgreSQL's generic plan of a prepared claim,
//! made while the table was empty, finds the claimed rows by reading the whole table once it
//! is not (14 ms a claim at 30,000 rows instead of 1.4, and a burst to 16 running workers
//! drained at 0.70 of one worker's rate). sqlx sends an unprepared statement as a parse that
//! it waits on before it binds and executes: two round trips a claim. The simple-query
//! protocol takes one, plans the statement for the values in its text, and runs as a
//! transaction of its own when no transaction is open. Each value (a consumer's name, worker
//! ids, some read back from the table, a token, numbers) is written as a typed constant in
//! ASCII alone, so that the statement means what it means with the same values bound as
//! parameters, whatever the session's `standard_conforming_strings` and client encoding.

use std::fmt::Write as _;
use std::sync::Arc;

use inboxed_core::StoreError;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Postgres};

/// One value, typed as sqlx would bind it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
    Int8(Option<i64>),
    Int4(Option<i32>),
    Bool(bool),
    Texts(Vec<Option<String>>),
    Byteas(Vec<Vec<u8>>),
    Int4s(Vec<i32>),
    Int8s(Option<Vec<i64>>),
}

/// `From` for each Rust type the engine binds, so one call binds it or writes it in.
macro_rules! values {
    ($($ty:ty => $variant:ident $(($wrap:ident))?;)*) => {
        $(impl From<$ty> for Value {
            fn from(v: $ty) -> Self {
                Self::$variant($($wrap)?(v))
            }
        })*
    };
}

values! {
    String => Text(Some);
    Option<String> => Text;
    Vec<u8> => Bytes(Some);
    Option<Vec<u8>> => Bytes;
    i64 => Int8(Some);
    Option<i64> => Int8;
    i32 => Int4(Some);
    bool => Bool;
    Vec<Option<String>> => Texts;
    Vec<Vec<u8>> => Byteas;
    Vec<i32> => Int4s;
    Option<Vec<i64>> => Int8s;
}

/// A statement's text and the values of its `$1`, `$2` …, in order.
#[derive(Debug, Clone)]
pub(crate) struct Inline {
    sql: Arc<str>,
    values: Vec<Value>,
}

impl Inline {
    pub(crate) fn new(sql: &Arc<str>) -> Self {
        Self {
            sql: Arc::clone(sql),
            values: Vec::new(),
        }
    }

    /// The next parameter's value.
    pub(crate) fn push(mut self, value: Value) -> Self {
        self.values.push(value);
        self
    }

    /// Runs the statement on `conn`; the rows it changed.
    pub(crate) async fn execute<'c, E>(self, conn: E) -> Result<u64, StoreError>
    where
        E: sqlx::Executor<'c, Database = Postgres>,
    {
        sqlx::raw_sql(AssertSqlSafe(self.text()?))
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
            .map_err(StoreError::from_sqlx)
    }

    /// Runs the statement on `conn`; the rows it returned, in text form (sqlx decodes each
    /// column's; a bytea in `bytea_output = escape` form is read by
    /// [`Columns`](inboxed_core::engine::Columns)).
    pub(crate) async fn fetch_all<'c, E>(self, conn: E) -> Result<Vec<PgRow>, StoreError>
    where
        E: sqlx::Executor<'c, Database = Postgres>,
    {
        sqlx::raw_sql(AssertSqlSafe(self.text()?))
            .fetch_all(conn)
            .await
            .map_err(StoreError::from_sqlx)
    }

    /// The text to send: comments dropped, each `$n` outside a quoted string, a quoted
    /// identifier or a comment replaced by its value.
    ///
    /// # Errors
    /// A text value holding a NUL (the protocol ends the statement's text at a NUL, and
    /// PostgreSQL's text cannot hold one), or a `$n` with no value (a mistake in the library).
    pub(crate) fn text(&self) -> Result<String, StoreError> {
        let sql = &*self.sql;
        let bytes = sql.as_bytes();
        let mut out = String::with_capacity(sql.len() + 32 * self.values.len());
        let mut i = 0;
        let mut copied = 0;
        // The highest `$n` seen: a value beyond it is a mistake, as binding it would be.
        let mut highest = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\'' | b'"' => i = closing(bytes, i) + 1,
                b'-' if bytes.get(i + 1) == Some(&b'-') => {
                    out.push_str(&sql[copied..i]);
                    i = sql[i..].find('\n').map_or(bytes.len(), |n| i + n);
                    copied = i;
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    out.push_str(&sql[copied..i]);
                    i = block_comment_end(bytes, i);
                    out.push(' ');
                    copied = i;
                }
                b'$' if i > 0 && is_word(bytes[i - 1]) => i += 1,
                b'$' => {
                    let digits = bytes[i + 1..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                    if digits == 0 {
                        // A dollar-quoted string: `$tag$ … $tag$`.
                        i = dollar_quote_end(sql, i);
                        continue;
                    }
                    out.push_str(&sql[copied..i]);
                    let end = i + 1 + digits;
                    let n: usize = sql[i + 1..end].parse().unwrap_or(0);
                    highest = highest.max(n);
                    let value = n
                        .checked_sub(1)
                        .and_then(|k| self.values.get(k))
                        .ok_or_else(|| invalid(format!("${n} has no value")))?;
                    out.push('(');
                    value.write(&mut out)?;
                    out.push(')');
                    i = end;
                    copied = i;
                }
                _ => i += 1,
            }
        }
        out.push_str(&sql[copied..]);
        if highest < self.values.len() {
            return Err(invalid(format!(
                "{} values for a statement that takes {highest}",
                self.values.len()
            )));
        }
        Ok(out)
    }
}

impl Value {
    /// The value as a constant of its type.
    fn write(&self, out: &mut String) -> Result<(), StoreError> {
        match self {
            Self::Text(v) => typed(out, v.as_deref(), "text", text),
            Self::Bytes(v) => typed(out, v.as_deref(), "bytea", bytea),
            Self::Int8(v) => typed(out, v.as_ref(), "int8", number),
            Self::Int4(v) => typed(out, v.as_ref(), "int4", number),
            Self::Bool(v) => {
                out.push_str(if *v { "true" } else { "false" });
                Ok(())
            }
            Self::Texts(v) => typed(out, Some(v.as_slice()), "text[]", |out, v| {
                array(out, v, |out, s| match s {
                    Some(s) => text(out, s),
                    None => {
                        out.push_str("NULL");
                        Ok(())
                    }
                })
            }),
            Self::Byteas(v) => typed(out, Some(v.as_slice()), "bytea[]", |out, v| {
                array(out, v, |out, b| bytea(out, b))
            }),
            Self::Int4s(v) => typed(out, Some(v.as_slice()), "int4[]", |out, v| {
                array(out, v, number)
            }),
            Self::Int8s(v) => typed(out, v.as_deref(), "int8[]", |out, v| array(out, v, number)),
        }
    }
}

/// `value::ty`, or `NULL::ty`.
fn typed<T: ?Sized>(
    out: &mut String,
    value: Option<&T>,
    ty: &str,
    write: impl FnOnce(&mut String, &T) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    match value {
        Some(v) => write(out, v)?,
        None => out.push_str("NULL"),
    }
    out.push_str("::");
    out.push_str(ty);
    Ok(())
}

/// An escape string (`E'…'`), whose meaning does not depend on `standard_conforming_strings`,
/// in ASCII alone: a character beyond it as a Unicode escape (`\uXXXX`, `\UXXXXXXXX`), so that
/// no client encoding can read one of its bytes as part of the next (a session set to SJIS
/// reads `0x81 0x5C` as one character, and would lose the backslash that escapes a quote).
fn text(out: &mut String, s: &str) -> Result<(), StoreError> {
    if s.contains('\0') {
        return Err(invalid("a text value holds a NUL byte".to_owned()));
    }
    out.push_str("E'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            c if c.is_ascii() => out.push(c),
            c if u32::from(c) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08X}", u32::from(c));
            }
        }
    }
    out.push('\'');
    Ok(())
}

/// Bytes in bytea's hex form, as an escape string (`E'\\x…'`).
fn bytea(out: &mut String, b: &[u8]) -> Result<(), StoreError> {
    out.push_str("E'\\\\x");
    for byte in b {
        let _ = write!(out, "{byte:02x}");
    }
    out.push('\'');
    Ok(())
}

/// A number, quoted so that a negative one cannot meet a `-` before it as a comment.
fn number<N: std::fmt::Display>(out: &mut String, n: &N) -> Result<(), StoreError> {
    let _ = write!(out, "'{n}'");
    Ok(())
}

/// `ARRAY[…]`, or `'{}'` when empty (an empty `ARRAY[]` has no type to cast from).
fn array<T>(
    out: &mut String,
    items: &[T],
    mut item: impl FnMut(&mut String, &T) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    if items.is_empty() {
        out.push_str("'{}'");
        return Ok(());
    }
    out.push_str("ARRAY[");
    for (k, v) in items.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        item(out, v)?;
    }
    out.push(']');
    Ok(())
}

fn invalid(why: String) -> StoreError {
    StoreError::from_sqlx(sqlx::Error::Encode(why.into()))
}

/// Whether `b` continues an identifier (in which `$` may appear: `a$1` is one word).
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The index of the quote that closes the one at `open` (a doubled quote is one quoted
/// character), or the end of the text.
fn closing(bytes: &[u8], open: usize) -> usize {
    let quote = bytes[open];
    let mut i = open + 1;
    while i < bytes.len() {
        if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i;
        }
        // An escape string (`E'…'`) may escape its quote with a backslash.
        if bytes[i] == b'\\' && quote == b'\'' && escape_string(bytes, open) {
            i += 2;
            continue;
        }
        i += 1;
    }
    bytes.len()
}

/// Whether the quote at `open` opens an escape string: `E'…'`, the `E` a word of its own.
fn escape_string(bytes: &[u8], open: usize) -> bool {
    open > 0
        && bytes[open - 1].eq_ignore_ascii_case(&b'e')
        && (open == 1 || !is_word(bytes[open - 2]))
}

/// The index after the `*/` that closes the comment opened at `open` (they nest).
fn block_comment_end(bytes: &[u8], open: usize) -> usize {
    let mut depth = 0;
    let mut i = open;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The index after the string dollar-quoted at `open` (`$tag$ … $tag$`), or after the `$`
/// when it opens none.
fn dollar_quote_end(sql: &str, open: usize) -> usize {
    let rest = &sql[open + 1..];
    let Some(tag_len) = rest.find('$') else {
        return open + 1;
    };
    let tag = &rest[..tag_len];
    if !tag
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80)
    {
        return open + 1;
    }
    let delimiter = &sql[open..open + tag_len + 2];
    let body = open + delimiter.len();
    sql[body..]
        .find(delimiter)
        .map_or(sql.len(), |n| body + n + delimiter.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(sql: &str, values: Vec<Value>) -> String {
        let mut q = Inline::new(&Arc::from(sql));
        for v in values {
            q = q.push(v);
        }
        q.text().unwrap()
    }

    #[test]
    fn values_are_written_as_typed_constants() {
        let out = render(
            "SELECT $1, $2, $3, $4, $5, $6",
            vec![
                Value::Text(Some("it's a \\ test".into())),
                Value::Bytes(Some(vec![0, 0xab])),
                Value::Int8(Some(-5)),
                Value::Int4(None),
                Value::Bool(true),
                Value::Texts(vec![Some("a".into()), None]),
            ],
        );
        assert_eq!(
            out,
            "SELECT (E'it''s a \\\\ test'::text), (E'\\\\x00ab'::bytea), ('-5'::int8), \
             (NULL::int4), (true), (ARRAY[E'a',NULL]::text[])"
        );
    }

    #[test]
    fn placeholders_in_comments_and_quotes_are_left_alone() {
        let sql = "-- $1 is the consumer\nSELECT '$1', \"a$1\", $$ $1 $$, $q$ $1 $q$, x$1, \
                   /* $1 /* $1 */ */ $1, E'\\' $1', $10";
        let mut values = vec![Value::Int8(Some(1))];
        values.resize(10, Value::Int8(Some(0)));
        values[9] = Value::Int8(Some(10));
        let out = render(sql, values);
        assert_eq!(
            out,
            "\nSELECT '$1', \"a$1\", $$ $1 $$, $q$ $1 $q$, x$1,   ('1'::int8), E'\\' $1', \
             ('10'::int8)"
        );
    }

    #[test]
    fn empty_arrays_and_nulls_keep_their_type() {
        let out = render(
            "$1 $2 $3",
            vec![
                Value::Int8s(None),
                Value::Int4s(vec![]),
                Value::Byteas(vec![vec![1]]),
            ],
        );
        assert_eq!(
            out,
            "(NULL::int8[]) ('{}'::int4[]) (ARRAY[E'\\\\x01']::bytea[])"
        );
    }

    #[test]
    fn text_beyond_ascii_is_written_as_unicode_escapes() {
        let out = render("SELECT $1", vec![Value::Text(Some("Á\\'é😀".into()))]);
        assert_eq!(out, "SELECT (E'\\u00C1\\\\''\\u00E9\\U0001F600'::text)");
        assert!(out.is_ascii());
    }

    #[test]
    fn a_nul_or_a_missing_value_is_refused() {
        let q = Inline::new(&Arc::from("SELECT $1")).push(Value::Text(Some("a\0b".into())));
        assert!(q.text().is_err());
        let q = Inline::new(&Arc::from("SELECT $2")).push(Value::Bool(false));
        assert!(q.text().is_err());
        let q = Inline::new(&Arc::from("SELECT $1"))
            .push(Value::Bool(false))
            .push(Value::Bool(true));
        assert!(q.text().is_err(), "a value with no placeholder");
    }
}
