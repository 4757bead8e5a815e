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
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use inboxed_core::driver::Driver;
use inboxed_core::engine::{Conn, Engine};
use inboxed_core::{Envelope, Handler, HandlerError, StoreError};

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

/// Whether the engine named `engine` (`Driver::NAME`) has conflicts to inject.
pub(crate) fn possible(engine: &str) -> bool {
    matches!(engine, "PostgreSQL" | "MySQL")
}

/// The conflicts of one delivery's attack on engine `E`: where, and how many are left. The
/// statements that raise them run through `E`, whichever driver it speaks.
#[derive(Debug)]
pub(crate) struct Injection<E> {
    point: Point,
    raised: AtomicU32,
    /// Set when the engine ran a raising statement without failing.
    misfired: AtomicBool,
    engine: PhantomData<fn() -> E>,
}

impl<E: Engine> Injection<E> {
    pub(crate) fn new(point: Point) -> Self {
        Self {
            point,
            raised: AtomicU32::new(0),
            misfired: AtomicBool::new(false),
            engine: PhantomData,
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
    async fn raise(&self, here: Point, conn: &mut Conn<E>) -> Result<(), StoreError> {
        if here != self.point {
            return Ok(());
        }
        let n = self.raised.fetch_add(1, Ordering::SeqCst);
        if n >= INJECTIONS {
            self.raised.fetch_sub(1, Ordering::SeqCst);
            return Ok(());
        }
        let deadlock = n == 1;
        let name = <E::Db as Driver>::NAME;
        let armed = E::execute_script(&statement(name, here, deadlock), conn).await;
        match armed {
            Err(e) => Err(e),
            Ok(()) if here == Point::Commit && name == "PostgreSQL" => Ok(()),
            Ok(()) => {
                self.misfired.store(true, Ordering::SeqCst);
                Err(StoreError::Database(sqlx::Error::Protocol(format!(
                    "inboxed-testkit: {name} did not raise the injected conflict"
                ))))
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

impl<E: Engine + 'static> Seams<E::Db> for Injection<E> {
    async fn after_claim(&self, conn: &mut Conn<E>) -> Result<(), StoreError> {
        self.raise(Point::Claim, conn).await
    }

    async fn before_commit(&self, conn: &mut Conn<E>) -> Result<(), StoreError> {
        self.raise(Point::Commit, conn).await
    }
}

/// The user's handler, then the handler's conflict, returned as the user's own `?` would
/// return a failed statement's error.
pub(crate) struct Contending<H, E> {
    pub(crate) inner: Arc<H>,
    pub(crate) injection: Arc<Injection<E>>,
}

impl<E: Engine + 'static, H: Handler<E::Db>> Handler<E::Db> for Contending<H, E> {
    async fn handle(&self, msg: &Envelope, conn: &mut Conn<E>) -> Result<(), HandlerError> {
        self.inner.handle(msg, conn).await?;
        self.injection.raise(Point::Handler, conn).await?;
        Ok(())
    }
}
