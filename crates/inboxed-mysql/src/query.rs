//! A statement of the shared store layer as MySQL runs it: the arguments bound in the order the
//! shared code gives them, then handed to each statement of the operation's [`Script`] in the
//! order its placeholders take them.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures_util::StreamExt as _;
use sqlx::mysql::{MySqlArguments, MySqlRow};
use sqlx::{AssertSqlSafe, MySql, MySqlConnection};

use inboxed_core::StoreError;
use inboxed_core::engine::Args;

use crate::script::{Script, ScriptError};

/// One argument, kept until the statements that use it are built.
#[derive(Debug, Clone)]
enum Value {
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
    Int(Option<i64>),
    Flag(bool),
}

/// A MySQL operation with its arguments.
#[derive(Debug)]
pub struct MySqlQuery {
    /// The operation's statements, or why its SQL file could not be read (reported when it
    /// runs; `every_sql_file_of_the_engine_parses` keeps the shipped files from it). An
    /// operation the engine does not provide has an empty file.
    script: Result<Arc<Script>, Arc<ScriptError>>,
    args: Vec<Value>,
}

impl MySqlQuery {
    pub(crate) fn new(script: Result<Arc<Script>, Arc<ScriptError>>) -> Self {
        let args = Vec::with_capacity(script.as_ref().map_or(0, |s| s.arity()));
        Self { script, args }
    }

    fn script(&self) -> Result<&Script, StoreError> {
        self.script.as_deref().map_err(|e| match &**e {
            ScriptError::Empty => StoreError::Unsupported {
                operation: "this operation on MySQL",
                reason: "the engine has no statement for it (the operations an engine \
                         leaves out are listed in its queries.rs)",
            },
            e => StoreError::Database(sqlx::Error::Protocol(format!("malformed SQL file: {e}"))),
        })
    }

    fn with(mut self, v: Value) -> Self {
        self.args.push(v);
        self
    }

    /// Statement `i` with the arguments its placeholders take.
    fn statement(
        &self,
        i: usize,
    ) -> Result<sqlx::query::Query<'static, MySql, MySqlArguments>, StoreError> {
        let s = &self.script()?.statements[i];
        let mut q = sqlx::query(AssertSqlSafe(Arc::clone(&s.sql)));
        for &n in &s.params {
            let Some(v) = self.args.get(n) else {
                return Err(StoreError::Database(sqlx::Error::Protocol(format!(
                    "statement takes argument ${} but {} were bound",
                    n + 1,
                    self.args.len()
                ))));
            };
            q = match v.clone() {
                Value::Text(t) => q.bind(t),
                Value::Bytes(b) => q.bind(b),
                Value::Int(n) => q.bind(n),
                Value::Flag(f) => q.bind(f),
            };
        }
        Ok(q)
    }

    /// Whether the operation is more than one statement (run in a transaction when it runs
    /// on its own).
    pub(crate) fn is_script(&self) -> bool {
        self.script.as_ref().is_ok_and(|s| s.statements.len() > 1)
    }

    /// Runs every statement in order on `conn`; the rows changed by the last one.
    pub(crate) async fn execute(self, conn: &mut MySqlConnection) -> Result<u64, StoreError> {
        Ok(self.run(conn, false).await?.0)
    }

    /// Runs every statement in order on `conn`; the rows the last one returned.
    pub(crate) async fn fetch_all(
        self,
        conn: &mut MySqlConnection,
    ) -> Result<Vec<MySqlRow>, StoreError> {
        Ok(self.run(conn, true).await?.1)
    }

    /// The statements in order; the last one's rows changed, or its rows (those of the
    /// statement marked `rows`, when one is). A statement marked `duplicate key: no rows` that
    /// fails with a duplicate key ends the operation there with neither, and so does a
    /// statement marked `undo: no rows` that changes a row; one that changes none leaves the
    /// result of the statement before it.
    async fn run(
        self,
        conn: &mut MySqlConnection,
        rows: bool,
    ) -> Result<(u64, Vec<MySqlRow>), StoreError> {
        let script = self.script()?;
        if script.one_trip {
            return self.run_in_one_trip(script, conn).await;
        }
        let last = script.statements.len() - 1;
        let fetch_at = script
            .statements
            .iter()
            .position(|s| s.returns_rows)
            .unwrap_or(last);
        let mut out = (0, Vec::new());
        let mut fetched = Vec::new();
        for (i, s) in script.statements.iter().enumerate() {
            let q = self.statement(i)?;
            let done = if i == fetch_at && rows {
                q.fetch_all(&mut *conn).await.map(|r| (0, r))
            } else {
                q.execute(&mut *conn)
                    .await
                    .map(|d| (d.rows_affected(), Vec::new()))
            };
            match done.map_err(StoreError::from_sqlx) {
                Ok((0, _)) if s.undo => {}
                Ok(_) if s.undo => return Ok((0, Vec::new())),
                Ok((n, r)) if i == fetch_at => {
                    fetched = r;
                    out.0 = n;
                }
                Ok((n, _)) => out.0 = n,
                Err(StoreError::UniqueViolation(_)) if s.duplicate_is_empty => {
                    return Ok((0, Vec::new()));
                }
                Err(e) => return Err(e),
            }
        }
        out.1 = fetched;
        Ok(out)
    }
}

impl MySqlQuery {
    /// [`Script::one_trip`]: the statements as one text query, each argument written in as a
    /// literal; the same outcome as statement by statement (rows changed by the last statement
    /// that is not an undo, and the last statement's rows when it is marked `rows`; neither
    /// when an undo changed a row or a marked duplicate key stopped the server).
    async fn run_in_one_trip(
        &self,
        script: &Script,
        conn: &mut MySqlConnection,
    ) -> Result<(u64, Vec<MySqlRow>), StoreError> {
        let mut text = String::new();
        for s in &script.statements {
            let mut at = 0;
            for (&hole, &n) in s.holes.iter().zip(&s.params) {
                text.push_str(&s.sql[at..hole]);
                let v = self.args.get(n).ok_or_else(|| {
                    StoreError::Database(sqlx::Error::Protocol(format!(
                        "statement takes argument ${} but {} were bound",
                        n + 1,
                        self.args.len()
                    )))
                })?;
                literal(v, &mut text);
                at = hole + 1;
            }
            text.push_str(&s.sql[at..]);
            text.push_str(";\n");
        }
        let mut results = sqlx::raw_sql(AssertSqlSafe(text)).fetch_many(&mut *conn);
        let mut changed = 0;
        let mut undone = false;
        let mut rows = Vec::new();
        let mut statements = script.statements.iter().peekable();
        while let Some(item) = results.next().await {
            // A row is not a statement's end: only its result or its error is.
            if let Ok(sqlx::Either::Right(row)) = item {
                if statements.peek().is_some_and(|s| s.returns_rows) {
                    rows.push(row);
                }
                continue;
            }
            let s = statements.next();
            match item.map_err(StoreError::from_sqlx) {
                Ok(sqlx::Either::Left(done)) if s.is_some_and(|s| s.undo) => {
                    undone |= done.rows_affected() > 0;
                }
                Ok(sqlx::Either::Left(done)) => changed = done.rows_affected(),
                Ok(sqlx::Either::Right(_)) => {}
                Err(StoreError::UniqueViolation(_)) if s.is_some_and(|s| s.duplicate_is_empty) => {
                    return Ok((0, Vec::new()));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(if undone {
            (0, Vec::new())
        } else {
            (changed, rows)
        })
    }
}

/// `v` as an SQL literal: text and bytes in hex (`_utf8mb4 X'…'`, `X'…'`), which no
/// `sql_mode` or character in them can turn into anything but the value.
fn literal(v: &Value, out: &mut String) {
    use std::fmt::Write as _;
    let hex = |b: &[u8], out: &mut String| {
        out.push_str("X'");
        for byte in b {
            let _ = write!(out, "{byte:02X}");
        }
        out.push('\'');
    };
    match v {
        Value::Text(Some(t)) => {
            out.push_str("_utf8mb4 ");
            hex(t.as_bytes(), out);
        }
        Value::Bytes(Some(b)) => hex(b, out),
        Value::Int(Some(n)) => {
            let _ = write!(out, "{n}");
        }
        Value::Flag(f) => out.push_str(if *f { "TRUE" } else { "FALSE" }),
        Value::Text(None) | Value::Bytes(None) | Value::Int(None) => out.push_str("NULL"),
    }
}

impl Args for MySqlQuery {
    fn text(self, v: &str) -> Self {
        self.with(Value::Text(Some(v.to_owned())))
    }
    fn opt_text(self, v: Option<&str>) -> Self {
        self.with(Value::Text(v.map(str::to_owned)))
    }
    fn bytes(self, v: &[u8]) -> Self {
        self.with(Value::Bytes(Some(v.to_vec())))
    }
    fn opt_bytes(self, v: Option<&[u8]>) -> Self {
        self.with(Value::Bytes(v.map(<[u8]>::to_vec)))
    }
    fn int(self, v: i64) -> Self {
        self.with(Value::Int(Some(v)))
    }
    fn count(self, v: u32) -> Self {
        self.with(Value::Int(Some(i64::from(v))))
    }
    fn opt_int(self, v: Option<i64>) -> Self {
        self.with(Value::Int(v))
    }
    fn flag(self, v: bool) -> Self {
        self.with(Value::Flag(v))
    }
    /// A JSON array as text, read by the statements with `JSON_TABLE` (MySQL has no arrays).
    fn texts(self, v: &[&str]) -> Self {
        self.with(Value::Text(Some(json_array(
            v.iter().map(|s| json_string(s)),
        ))))
    }
    /// A JSON array as text, or NULL.
    fn opt_ids(self, v: Option<&[i64]>) -> Self {
        self.with(Value::Text(
            v.map(|ids| json_array(ids.iter().map(i64::to_string))),
        ))
    }
}

fn json_array(items: impl Iterator<Item = String>) -> String {
    let mut out = String::from("[");
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out.push(']');
    out
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The parsed form of each SQL text the store has run, so that each is parsed once.
#[derive(Debug, Default)]
pub(crate) struct Scripts(RwLock<HashMap<Arc<str>, Arc<Script>>>);

impl Scripts {
    /// The script of `sql`, parsed on first use; a malformed text (a mistake in an SQL file)
    /// is kept as its error, reported when the operation runs.
    pub(crate) fn get(&self, sql: &Arc<str>) -> Result<Arc<Script>, Arc<ScriptError>> {
        if let Some(s) = self.0.read().unwrap_or_else(|e| e.into_inner()).get(sql) {
            return Ok(Arc::clone(s));
        }
        let parsed = Arc::new(Script::parse(sql).map_err(Arc::new)?);
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(Arc::clone(sql), Arc::clone(&parsed));
        Ok(parsed)
    }
}
