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
