//! An operation's SQL file as MySQL runs it: its statements, each with `?` placeholders and the
//! order in which they take the operation's arguments.
//!
//! The shared store layer binds an operation's arguments once, in order, as PostgreSQL's `$1`,
//! `$2` … number them, and reads the rows of one statement. MySQL differs on both counts: its
//! placeholder `?` takes the next argument each time it appears (so `$3` used twice is bound
//! twice), and it has no `UPDATE … RETURNING` (MariaDB has it for `INSERT` and `DELETE` only),
//! so a claim is an `UPDATE` that stamps rows with the claim's token followed by a `SELECT` of
//! the rows bearing it. The engine's SQL files therefore keep PostgreSQL's numbered
//! placeholders and may hold several statements, each ended by a `;` at the end of a line;
//! this module rewrites them for MySQL once, and the engine runs the statements in order on
//! one connection, returning the last statement's rows. The rows an operation changed are its last
//! statement's, so an insert that decides an outcome (a claim) ends its operation.

use std::sync::Arc;

/// One statement: MySQL's text and, for each `?` in it, the index (from 0) of the argument
/// it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement {
    pub(crate) sql: Arc<str>,
    pub(crate) params: Vec<usize>,
    /// Set by the directive `--! duplicate key: no rows` before the statement: its error 1062
    /// ends the operation with no rows (PostgreSQL's `ON CONFLICT DO NOTHING` with nothing
    /// returned), since InnoDB rolls back only the failed statement.
    pub(crate) duplicate_is_empty: bool,
    /// Set by the directive `--! undo: no rows` before the statement: when it changes a row it
    /// has undone the write before it, and the operation changed none; otherwise the operation
    /// changed what that write did. InnoDB's reads wait for an uncommitted row only when they
    /// lock, and find no row to lock in one not yet written: two transactions that each check
    /// the other's table and then write can both pass. Writing first, then checking with a
    /// locking read and undoing, cannot (the later check always sees the other's write).
    pub(crate) undo: bool,
    /// Set by the directive `--! rows` before the statement: the operation returns its rows
    /// rather than the last statement's. MySQL has no `UPDATE … RETURNING`: an operation locks
    /// and reads its rows (`SELECT … FOR UPDATE`), then changes them under that lock.
    pub(crate) returns_rows: bool,
    /// The byte offset in `sql` of each `?`, in order: where [`Script::one_trip`] writes the
    /// argument itself.
    pub(crate) holes: Vec<usize>,
}

/// The directive that sets [`Statement::duplicate_is_empty`].
const DUPLICATE_IS_EMPTY: &str = "duplicate key: no rows";
/// The directive that sets [`Statement::undo`].
const UNDO: &str = "undo: no rows";
/// The directive that sets [`Statement::returns_rows`].
const ROWS: &str = "rows";
/// The directive that sets [`Script::one_trip`], anywhere in the file.
const ONE_TRIP: &str = "one round trip";

/// The directives seen since the last statement ended.
#[derive(Debug, Default)]
struct Directives {
    duplicate_is_empty: bool,
    undo: bool,
    returns_rows: bool,
}

/// An operation's statements, in the order they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Script {
    pub(crate) statements: Vec<Statement>,
    /// Set by the directive `--! one round trip`: the statements go to the server as one text
    /// query, the arguments written into it as literals, instead of one prepared statement per
    /// round trip. The server stops at the first statement that fails, so a duplicate key ends
    /// the operation as it does statement by statement; an `undo` must be the last statement,
    /// since nothing can stop the ones after it, and so must the statement marked `rows`. For
    /// small arguments only (they travel as hex, twice their size): the claims, whose write
    /// and check would otherwise cost two or three.
    pub(crate) one_trip: bool,
}

/// What [`Script::parse`] refuses: a template mistake, found when the store is built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ScriptError {
    /// A `$` not followed by a positive argument number outside a literal or comment.
    #[error("`$` at byte {0} is not followed by an argument number (`$1`, `$2` …)")]
    BadPlaceholder(usize),
    /// A string literal or quoted identifier that never closes.
    #[error("a quote opened at byte {0} is never closed")]
    Unterminated(usize),
    /// No statement at all.
    #[error("the file holds no statement")]
    Empty,
    /// A `--!` line that is not a known directive.
    #[error("unknown directive `--! {0}`")]
    UnknownDirective(String),
    /// A script sent in one round trip with a statement that returns rows, or an `undo` that
    /// is not its last statement (the statements after it would run regardless).
    #[error("`--! one round trip` takes `rows` and `undo` on the last statement only, not both")]
    OneTrip,
}

impl Script {
    /// Splits `sql` into statements and rewrites `$n` to `?`. Comments (`-- …` to the end of
    /// the line, `/* … */`) are dropped; quoted text (`'…'`, `"…"`, `` `…` ``) is kept as it is,
    /// `$` included.
    pub(crate) fn parse(sql: &str) -> Result<Self, ScriptError> {
        let bytes = sql.as_bytes();
        let mut statements = Vec::new();
        let mut next = Building::default();
        let mut one_trip = false;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match b {
                b'\'' | b'"' | b'`' => {
                    let end = closing(bytes, i).ok_or(ScriptError::Unterminated(i))?;
                    next.out.push_str(&sql[i..=end]);
                    i = end + 1;
                }
                b'-' if bytes.get(i + 1) == Some(&b'-') => {
                    let end = sql[i..].find('\n').map_or(bytes.len(), |n| i + n);
                    if let Some(directive) = sql[i..end].strip_prefix("--!") {
                        match directive.trim() {
                            DUPLICATE_IS_EMPTY => next.flag.duplicate_is_empty = true,
                            UNDO => next.flag.undo = true,
                            ROWS => next.flag.returns_rows = true,
                            ONE_TRIP => one_trip = true,
                            other => return Err(ScriptError::UnknownDirective(other.to_owned())),
                        }
                    }
                    i = end;
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    let end = sql[i + 2..]
                        .find("*/")
                        .ok_or(ScriptError::Unterminated(i))?;
                    i += 2 + end + 2;
                    next.out.push(' ');
                }
                b'$' => {
                    let digits = bytes[i + 1..]
                        .iter()
                        .take_while(|d| d.is_ascii_digit())
                        .count();
                    let n: usize = sql[i + 1..i + 1 + digits]
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or(ScriptError::BadPlaceholder(i))?;
                    next.params.push(n - 1);
                    next.holes.push(next.out.len());
                    next.out.push('?');
                    i += 1 + digits;
                }
                b';' if ends_line(bytes, i + 1) => {
                    next.end(&mut statements);
                    i += 1;
                }
                _ => {
                    let ch = sql[i..].chars().next().unwrap_or(' ');
                    next.out.push(ch);
                    i += ch.len_utf8();
                }
            }
        }
        next.end(&mut statements);
        if statements.is_empty() {
            return Err(ScriptError::Empty);
        }
        let last = statements.len() - 1;
        if one_trip
            && statements.iter().enumerate().any(|(i, s)| {
                ((s.returns_rows || s.undo) && i != last) || (s.returns_rows && s.undo)
            })
        {
            return Err(ScriptError::OneTrip);
        }
        Ok(Self {
            statements,
            one_trip,
        })
    }

    /// The number of arguments the operation binds: one more than the highest index used.
    pub(crate) fn arity(&self) -> usize {
        self.statements
            .iter()
            .flat_map(|s| s.params.iter())
            .max()
            .map_or(0, |n| n + 1)
    }
}

/// The statement being built: its text so far, the argument each `?` takes and where it
/// stands, and the directives that mark it.
#[derive(Debug, Default)]
struct Building {
    out: String,
    params: Vec<usize>,
    holes: Vec<usize>,
    flag: Directives,
}

impl Building {
    /// Ends the statement, if it holds anything but blanks, and starts the next.
    fn end(&mut self, statements: &mut Vec<Statement>) {
        let done = std::mem::take(self);
        let sql = done.out.trim();
        if !sql.is_empty() {
            let lead = done.out.len() - done.out.trim_start().len();
            statements.push(Statement {
                sql: Arc::from(sql),
                params: done.params,
                duplicate_is_empty: done.flag.duplicate_is_empty,
                undo: done.flag.undo,
                returns_rows: done.flag.returns_rows,
                holes: done.holes.into_iter().map(|h| h - lead).collect(),
            });
        }
    }
}

/// Whether only blanks (or a comment) follow on the line from `i`.
fn ends_line(bytes: &[u8], i: usize) -> bool {
    let rest = &bytes[i.min(bytes.len())..];
    let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
    let code = line
        .windows(2)
        .position(|w| w == b"--")
        .map_or(line, |p| &line[..p]);
    code.iter().all(u8::is_ascii_whitespace)
}

/// The index of the quote closing the one at `open`; a doubled quote is an escaped one, and
/// a backslash escapes the next byte in MySQL's string literals (the default `sql_mode`).
fn closing(bytes: &[u8], open: usize) -> Option<usize> {
    let q = bytes[open];
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if q != b'`' => i += 2,
            c if c == q => {
                if bytes.get(i + 1) == Some(&q) {
                    i += 2;
                } else {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(sql: &str, params: &[usize]) -> Statement {
        Statement {
            sql: Arc::from(sql),
            params: params.to_vec(),
            duplicate_is_empty: false,
            undo: false,
            returns_rows: false,
            holes: sql.match_indices('?').map(|(i, _)| i).collect(),
        }
    }

    #[test]
    fn numbered_placeholders_become_positional_in_use_order() {
        let s = Script::parse("SELECT $2, $1, $2 FROM t WHERE a = $10")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.statements,
            vec![stmt("SELECT ?, ?, ? FROM t WHERE a = ?", &[1, 0, 1, 9])]
        );
        assert_eq!(s.arity(), 10);
    }

    #[test]
    fn statements_end_at_a_semicolon_that_ends_its_line() {
        let sql = "-- claim: $1 consumer\nUPDATE t SET x = $1 WHERE y = ';'; -- stamp\n\
                   SELECT a FROM t WHERE x = $1;\n";
        let s = Script::parse(sql).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.statements,
            vec![
                stmt("UPDATE t SET x = ? WHERE y = ';'", &[0]),
                stmt("SELECT a FROM t WHERE x = ?", &[0]),
            ]
        );
    }

    #[test]
    fn a_semicolon_inside_a_line_or_a_literal_does_not_split() {
        let s = Script::parse("SELECT 'a;\nb', `c;` ; SELECT 1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.statements.len(), 1, "{s:?}");
    }

    #[test]
    fn dollars_in_literals_and_comments_are_not_placeholders() {
        let s = Script::parse("/* $9 */ SELECT '$1', \"$2\", 'it''s $3', 'a\\'$4' -- $5\n, $1")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.statements[0].params, vec![0]);
        assert!(s.statements[0].sql.contains("'it''s $3'"));
    }

    #[test]
    fn a_directive_marks_the_statement_after_it() {
        let s = Script::parse(
            "--! rows\nSELECT 0;\n--! duplicate key: no rows\nINSERT INTO t VALUES ($1);\n\
             --! undo: no rows\nDELETE FROM t WHERE a = $1;\nSELECT 1",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let flags: Vec<(bool, bool, bool)> = s
            .statements
            .iter()
            .map(|s| (s.returns_rows, s.duplicate_is_empty, s.undo))
            .collect();
        assert_eq!(
            flags,
            [
                (true, false, false),
                (false, true, false),
                (false, false, true),
                (false, false, false)
            ]
        );
        assert_eq!(
            Script::parse("--! ignore errors\nSELECT 1"),
            Err(ScriptError::UnknownDirective("ignore errors".to_owned()))
        );
    }

    #[test]
    fn one_round_trip_marks_where_each_argument_goes() {
        let s = Script::parse(
            "--! one round trip\n  INSERT INTO t VALUES ($2, '?', $1);\n--! undo: no rows\n\
             DELETE FROM t WHERE a = $1",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(s.one_trip);
        let first = &s.statements[0];
        assert_eq!(&*first.sql, "INSERT INTO t VALUES (?, '?', ?)");
        assert_eq!(first.holes, [22, 30]);
        assert_eq!(s.statements[1].holes, [24]);
        for refused in [
            "--! one round trip\n--! rows\nSELECT 1;\nSELECT 2",
            "--! one round trip\n--! undo: no rows\nDELETE FROM t;\nSELECT 2",
            "--! one round trip\nSELECT 1;\n--! rows\n--! undo: no rows\nDELETE FROM t",
        ] {
            assert_eq!(
                Script::parse(refused),
                Err(ScriptError::OneTrip),
                "{refused}"
            );
        }
    }

    #[test]
    fn every_sql_file_of_the_engine_parses() {
        for dir in ["sql", "migrations"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            for entry in std::fs::read_dir(&path).unwrap_or_else(|e| panic!("{e}")) {
                let file = entry.unwrap_or_else(|e| panic!("{e}")).path();
                let sql = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}"));
                if let Err(e) = Script::parse(&sql) {
                    panic!("{}: {e}", file.display());
                }
            }
        }
    }

    #[test]
    fn template_mistakes_are_refused() {
        assert_eq!(
            Script::parse("SELECT $"),
            Err(ScriptError::BadPlaceholder(7))
        );
        assert_eq!(
            Script::parse("SELECT $0"),
            Err(ScriptError::BadPlaceholder(7))
        );
        assert_eq!(
            Script::parse("SELECT 'x"),
            Err(ScriptError::Unterminated(7))
        );
        assert_eq!(Script::parse("-- nothing\n ;\n"), Err(ScriptError::Empty));
    }
}
