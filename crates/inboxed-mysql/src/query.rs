//! A statement of the shared store layer as MySQL runs it: the arguments bound in the order the
//! shared code gives them, then handed to each statement of the operation's [`Script`] in the
//! order its placeholders take them.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use sqlx::mysql::{MySqlArguments, MySqlRow};
use sqlx::{AssertSqlSafe, MySql, MySqlConnection};

use inboxed_core::StoreError;
use inboxed_core::engine::Args;

use crate::script::Script;

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
    script: Arc<Script>,
    args: Vec<Value>,
}

impl MySqlQuery {
    pub(crate) fn new(script: Arc<Script>) -> Self {
        let args = Vec::with_capacity(script.arity());
        Self { script, args }
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
        let s = &self.script.statements[i];
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

    /// Runs every statement in order on `conn`; the rows changed by the last one.
    pub(crate) async fn execute(self, conn: &mut MySqlConnection) -> Result<u64, StoreError> {
        let mut changed = 0;
        for i in 0..self.script.statements.len() {
            changed = self
                .statement(i)?
                .execute(&mut *conn)
                .await
                .map_err(StoreError::from_sqlx)?
                .rows_affected();
        }
        Ok(changed)
    }

    /// Runs every statement in order on `conn`; the rows the last one returned.
    pub(crate) async fn fetch_all(
        self,
        conn: &mut MySqlConnection,
    ) -> Result<Vec<MySqlRow>, StoreError> {
        let last = self.script.statements.len() - 1;
        for i in 0..last {
            self.statement(i)?
                .execute(&mut *conn)
                .await
                .map_err(StoreError::from_sqlx)?;
        }
        self.statement(last)?
            .fetch_all(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)
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
    /// The script of `sql`, parsed on first use.
    ///
    /// # Errors
    /// The SQL text is malformed for [`Script::parse`] (a mistake in an SQL file).
    pub(crate) fn get(&self, sql: &Arc<str>) -> Result<Arc<Script>, StoreError> {
        if let Some(s) = self.0.read().unwrap_or_else(|e| e.into_inner()).get(sql) {
            return Ok(Arc::clone(s));
        }
        let parsed = Arc::new(Script::parse(sql).map_err(|e| {
            StoreError::Database(sqlx::Error::Protocol(format!("malformed SQL file: {e}")))
        })?);
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(Arc::clone(sql), Arc::clone(&parsed));
        Ok(parsed)
    }
}
