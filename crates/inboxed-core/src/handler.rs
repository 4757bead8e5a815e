//! The user's side: apply one message's business change inside the inbox transaction.

use std::future::Future;

use crate::envelope::Envelope;
use crate::error::HandlerError;

/// Applies one message's business change inside the inbox transaction.
///
/// The processor has already begun the transaction and recorded the dedup claim. Write through
/// `conn` and **do not commit**: the processor commits after you return `Ok`, and the message is
/// acked only after that commit succeeds. `conn.begin()` gives you a savepoint if you need one.
///
/// Keep slow calls (HTTP, email) out of this method. The uncommitted claim blocks concurrent
/// duplicates for as long as the transaction is open, and a side effect outside the database is
/// repeated on redelivery: the inbox only covers writes made through `conn`.
///
/// Implement it with a plain `async fn`:
///
/// ```no_run
/// # use inboxed_core::{Envelope, Handler, HandlerError, ResultExt};
/// # use sqlx::{Postgres, PgConnection};
/// struct Billing;
///
/// #[derive(serde::Deserialize)]
/// struct Charge { account: String, cents: i64 }
///
/// impl Handler<Postgres> for Billing {
///     async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
///         // A payload that does not decode never will: dead-letter it, don't retry it.
///         let charge: Charge = msg.json().permanent()?;
///         sqlx::query("UPDATE accounts SET balance = balance - $1 WHERE id = $2")
///             .bind(charge.cents)
///             .bind(&charge.account)
///             .execute(&mut *conn)
///             .await?; // deadlocks and lost connections count as transient
///         Ok(())
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    note = "implement `inboxed::Handler<sqlx::Postgres>` (or `<sqlx::Sqlite>`) for your consumer"
)]
pub trait Handler<DB: sqlx::Database>: Send + Sync + 'static {
    /// Applies `msg` through `conn`, the inbox transaction's connection.
    fn handle(
        &self,
        msg: &Envelope,
        conn: &mut DB::Connection,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

/// Calls the handler under `deadline`, with panics caught: neither may take the consumer down.
/// Both come back as transient failures, so the message is retried and, past its attempts,
/// dead-lettered.
pub(crate) async fn call_guarded<DB: sqlx::Database, H: Handler<DB>>(
    handler: &H,
    msg: &Envelope,
    conn: &mut DB::Connection,
    deadline: std::time::Duration,
) -> Result<(), HandlerError> {
    use futures_util::FutureExt;
    let run = std::panic::AssertUnwindSafe(handler.handle(msg, conn)).catch_unwind();
    match tokio::time::timeout(deadline, run).await {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => Err(HandlerError::transient(format!(
            "handler panicked: {}",
            panic_message(panic.as_ref())
        ))),
        Err(_) => Err(HandlerError::transient(format!(
            "handler exceeded its deadline of {deadline:?}"
        ))),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
