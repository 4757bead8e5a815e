//! The pool options every server engine's `pool_options` starts from.

use std::time::Duration;

use sqlx::Database;
use sqlx::pool::PoolOptions;

/// How long a pooled connection may sit idle before the pool checks it, with a round trip,
/// as it hands it out.
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(1);

/// `options` checking a connection as the pool hands it out only when it sat idle a second
/// or more, where sqlx's default checks every one: one round trip of every
/// transaction. A connection in steady use needs no check; one that breaks anyway fails its
/// transaction's first statement, a transient failure, as one that breaks a moment after a
/// check would. A failed check closes the connection, and the pool hands out another.
#[must_use]
pub fn check_when_idle<DB: Database>(options: PoolOptions<DB>) -> PoolOptions<DB> {
    options
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < CHECK_IDLE_AFTER {
                    return Ok(true);
                }
                Ok(sqlx::Connection::ping(conn).await.is_ok())
            })
        })
}
