//! Injected contention: a serialization failure, then a deadlock, raised by the engine itself
//! inside the inbox transaction, at the claim, inside the handler (after the user's code ran,
//! returned through the handler as its `?` would return it) or at commit. The processor must
//! retry the transaction in process; a handler whose work does not roll back with it does that
//! work again.
//!
//! The failures are real server errors, with the codes a real conflict has, read back through
//! the driver and classified by the library's own code: PostgreSQL raises SQLSTATE 40001 and
//! 40P01 from PL/pgSQL, and fails the COMMIT itself through a deferred constraint trigger on a
//! temporary table (created inside the transaction, so it goes with it); MySQL and MariaDB
//! `SIGNAL` errors 1020 and 1213 (InnoDB never fails a COMMIT on a conflict, so there the last
//! statement before it fails). SQLite has nothing to inject: writers take turns at `BEGIN
//! IMMEDIATE`, and no statement inside a transaction meets a conflict.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use inboxed_core::driver::Driver;
use inboxed_core::{Envelope, Handler, HandlerError, StoreError};
use sqlx::{AssertSqlSafe, Executor};

use crate::hooks::Seams;

/// How many conflicts each point gets: a serialization failure, then a deadlock.
pub(crate) const INJECTIONS: u32 = 2;

/// Where the conflicts are raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    Claim,
    Handler,
    Commit,
}

impl Point {
    pub(crate) const ALL: [Self; 3] = [Self::Claim, Self::Handler, Self::Commit];
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Claim => "at the claim",
            Self::Handler => "inside the handler",
            Self::Commit => "at commit",
        })
    }
}

/// Whether the engine named `engine` (`sqlx::Database::NAME`) has conflicts to inject.
pub(crate) fn possible(engine: &str) -> bool {
    matches!(engine, "PostgreSQL" | "MySQL")
}

/// The conflicts of one delivery's attack: where, and how many are left.
#[derive(Debug)]
pub(crate) struct Injection {
    point: Point,
    raised: AtomicU32,
    /// Set when the engine ran a raising statement without failing.
    misfired: AtomicBool,
}

impl Injection {
    pub(crate) fn new(point: Point) -> Self {
        Self {
            point,
            raised: AtomicU32::new(0),
            misfired: AtomicBool::new(false),
        }
    }

    /// How many conflicts were raised.
    pub(crate) fn raised(&self) -> u32 {
        self.raised.load(Ordering::SeqCst)
    }

    /// Whether the engine failed to raise a conflict it was asked to.
    pub(crate) fn misfired(&self) -> bool {
        self.misfired.load(Ordering::SeqCst)
    }

    /// Raises the next conflict on `conn` when `here` is the point and any is left. `Err` is
    /// the engine's error; `Ok` when there was nothing to raise here, or (PostgreSQL, at
    /// commit) when the COMMIT to come is armed to fail.
    async fn raise<DB: sqlx::Database>(
        &self,
        here: Point,
        conn: &mut <DB as Driver>::Connection,
    ) -> Result<(), sqlx::Error>
    where
        for<'c> &'c mut <DB as Driver>::Connection: Executor<'c, Database = DB>,
    {
        if here != self.point {
            return Ok(());
        }
        let n = self.raised.fetch_add(1, Ordering::SeqCst);
        if n >= INJECTIONS {
            self.raised.fetch_sub(1, Ordering::SeqCst);
            return Ok(());
        }
        let deadlock = n == 1;
        let sql = statement(<DB as Driver>::NAME, here, deadlock);
        let armed = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut *conn).await;
        match armed {
            Err(e) => Err(e),
            Ok(_) if here == Point::Commit && <DB as Driver>::NAME == "PostgreSQL" => Ok(()),
            Ok(_) => {
                self.misfired.store(true, Ordering::SeqCst);
                Err(sqlx::Error::Protocol(format!(
                    "inboxed-testkit: {} did not raise the injected conflict",
                    <DB as Driver>::NAME
                )))
            }
        }
    }
}

/// The statement that raises a conflict on `engine` at `point`.
fn statement(engine: &str, point: Point, deadlock: bool) -> String {
    let what = if deadlock {
        "deadlock"
    } else {
        "serialization failure"
    };
    let message = format!("inboxed-testkit: injected {what} {point}");
    if engine == "MySQL" {
        let (state, number) = if deadlock {
            ("40001", 1213)
        } else {
            ("HY000", 1020)
        };
        return format!(
            "SIGNAL SQLSTATE '{state}' SET MYSQL_ERRNO = {number}, MESSAGE_TEXT = '{message}'"
        );
    }
    let state = if deadlock { "40P01" } else { "40001" };
    let raise = format!("RAISE EXCEPTION USING ERRCODE = '{state}', MESSAGE = '{message}'");
    if point != Point::Commit {
        return format!("DO $$BEGIN {raise}; END$$");
    }
    // A deferred constraint trigger fires at COMMIT, which then fails as a serialization
    // failure found at commit does; its table and function are temporary and created in
    // this transaction, so they roll back with it.
    format!(
        "CREATE TEMP TABLE inboxed_testkit_commit (n int) ON COMMIT DROP;
         CREATE FUNCTION pg_temp.inboxed_testkit_refuse() RETURNS trigger LANGUAGE plpgsql
             AS $$BEGIN {raise}; END$$;
         CREATE CONSTRAINT TRIGGER inboxed_testkit_refuse AFTER INSERT
             ON pg_temp.inboxed_testkit_commit DEFERRABLE INITIALLY DEFERRED
             FOR EACH ROW EXECUTE FUNCTION pg_temp.inboxed_testkit_refuse();
         INSERT INTO pg_temp.inboxed_testkit_commit VALUES (1)"
    )
}

impl<DB: sqlx::Database> Seams<DB> for Injection
where
    for<'c> &'c mut <DB as Driver>::Connection: Executor<'c, Database = DB>,
{
    async fn after_claim(&self, conn: &mut <DB as Driver>::Connection) -> Result<(), StoreError> {
        self.raise::<DB>(Point::Claim, conn)
            .await
            .map_err(StoreError::from_sqlx)
    }

    async fn before_commit(&self, conn: &mut <DB as Driver>::Connection) -> Result<(), StoreError> {
        self.raise::<DB>(Point::Commit, conn)
            .await
            .map_err(StoreError::from_sqlx)
    }
}

/// The user's handler, then the handler's conflict, returned as the user's own `?` would
/// return a failed statement's error.
pub(crate) struct Contending<H> {
    pub(crate) inner: Arc<H>,
    pub(crate) injection: Arc<Injection>,
}

impl<DB: sqlx::Database, H: Handler<DB>> Handler<DB> for Contending<H>
where
    for<'c> &'c mut <DB as Driver>::Connection: Executor<'c, Database = DB>,
{
    async fn handle(
        &self,
        msg: &Envelope,
        conn: &mut <DB as Driver>::Connection,
    ) -> Result<(), HandlerError> {
        self.inner.handle(msg, conn).await?;
        self.injection.raise::<DB>(Point::Handler, conn).await?;
        Ok(())
    }
}
