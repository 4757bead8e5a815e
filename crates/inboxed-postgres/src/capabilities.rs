//! What the inbox needs of a server that speaks PostgreSQL's protocol, checked when a processor
//! or worker starts (with the durability check). The engines that speak it without being it
//! (CockroachDB, YugabyteDB, Citus) differ from PostgreSQL in exactly such things, and a
//! difference that only shows under concurrency would break the guarantee without an error:
//!
//! - Advisory locks that exclude: the claims' key locks (`begin.sql`), the reaper's gate and
//!   the workers' liveness take them. CockroachDB accepts the functions and grants every lock
//!   to every session; a probe that holds a lock in one session and asks for it in another
//!   tells that from PostgreSQL, and a missing function is refused the same way.
//! - `FOR UPDATE SKIP LOCKED`: the workers' and the relays' claims.
//!
//! `LISTEN/NOTIFY` is not needed: workers poll when it fails (`WorkerConfig::notify`).

use std::sync::Arc;

use inboxed_core::StoreError;
use inboxed_core::driver::{Driver, Transaction};
use inboxed_core::engine::{Args, Columns, Conn, Engine};

const LOCK_HOLD: &str = include_str!("../sql/capability_lock_hold.sql");
const LOCK_TRY: &str = include_str!("../sql/capability_lock_try.sql");
const SKIP_LOCKED: &str = include_str!("../sql/capability_skip_locked.sql");

/// The advisory lock the probe takes: a key of this probe's own (the process and the time), so
/// that two processes starting together never wait on each other, nor on a claim.
fn probe_key() -> i64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    0x1b0c_5ed0_0000_0000 ^ (i64::from(std::process::id()) << 20) ^ i64::from(nanos)
}

const ADVISORY_HINT: &str = "inboxed fences claims and orders keys with advisory locks \
    (pg_advisory_xact_lock); without locks that exclude, two consumers can process one key \
    at once. PostgreSQL and Citus have them, YugabyteDB where they are enabled; CockroachDB \
    grants every lock to every session (docs/deployments.md, \"Distributed SQL engines\").";

const SKIP_LOCKED_HINT: &str = "the workers and the relays claim rows with FOR UPDATE SKIP \
    LOCKED; without it, use the processor alone (no store-then-process workers, no outbox).";

/// Refuses a server whose advisory locks do not exclude, or that has no `SKIP LOCKED`. Through
/// the store's own driver: the statements are planned each time (nothing prepared, safe
/// behind any proxy).
///
/// # Errors
/// [`StoreError::ServerUnfit`] naming the capability; a failure to connect or query as it is.
pub(crate) async fn check<S: Engine>(s: &S) -> Result<(), StoreError> {
    let key = probe_key();
    let mut holder = s.begin_write().await?;
    let probed = probe(s, &mut holder, key).await;
    // Rolled back on every path: a dropped transaction's rollback waits for the connection's
    // next use, and its lock with it.
    let _ = holder.rollback().await;
    probed
}

/// The probe, with `holder` (a transaction of the pool) to hold the lock.
async fn probe<S: Engine>(s: &S, holder: &mut Conn<S>, key: i64) -> Result<(), StoreError> {
    let statement = |sql: &str| s.fresh(&Arc::from(sql));
    if let Err(e) = S::execute(statement(LOCK_HOLD).int(key), holder).await {
        return Err(unfit_or("advisory locks", e, ADVISORY_HINT));
    }
    // Another session, outside the pool: a pool of one connection must not wait on itself.
    // In a transaction, as every statement of the store behind a transaction-pooling proxy.
    let mut other = s.session().await?;
    S::execute_script("BEGIN", &mut other).await?;
    let taken = S::fetch_all(statement(LOCK_TRY).int(key), &mut other)
        .await
        .and_then(|rows| match rows.first() {
            Some(row) => row.flag(0),
            None => Err(StoreError::Database(sqlx::Error::RowNotFound)),
        });
    let skip_locked = S::execute(statement(SKIP_LOCKED), &mut other).await;
    let _ = S::execute_script("ROLLBACK", &mut other).await;
    <S::Db as Driver>::close(other).await;
    match taken {
        Ok(false) => {}
        Ok(true) => {
            return Err(StoreError::ServerUnfit {
                setting: "advisory locks",
                value: "not exclusive (a second session took a lock the first held)".to_owned(),
                hint: ADVISORY_HINT,
            });
        }
        Err(e) => return Err(unfit_or("advisory locks", e, ADVISORY_HINT)),
    }
    if let Err(e) = skip_locked {
        return Err(unfit_or("FOR UPDATE SKIP LOCKED", e, SKIP_LOCKED_HINT));
    }
    Ok(())
}

/// The server's refusal of a statement as unfit when it says the feature is missing (an
/// undefined function, a syntax error, a feature not supported), otherwise the error as it is.
fn unfit_or(setting: &'static str, e: StoreError, hint: &'static str) -> StoreError {
    match e.code().as_deref() {
        // undefined_function, syntax_error, feature_not_supported
        Some(code @ ("42883" | "42601" | "0A000")) => StoreError::ServerUnfit {
            setting,
            value: format!("missing (SQLSTATE {code})"),
            hint,
        },
        _ => e,
    }
}
