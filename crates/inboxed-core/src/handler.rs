//! The user's side: apply one message's business change inside the inbox transaction.

use std::future::Future;

use crate::driver::Driver;
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
pub trait Handler<DB: Driver>: Send + Sync + 'static {
    /// Whether [`Handler::handle_batch`] is this handler's own: set it to `true` where you
    /// override `handle_batch`. Store-then-process workers give a claimed batch to
    /// `handle_batch` in one transaction only then; otherwise they run its rows through
    /// [`Handler::handle`] (see `handle_batch`). A wrapper around another handler forwards the
    /// inner one's (`const BATCHES: bool = H::BATCHES;`). Defaults to `false`.
    const BATCHES: bool = false;

    /// Applies `msg` through `conn`, the inbox transaction's connection.
    fn handle(
        &self,
        msg: &Envelope,
        conn: &mut DB::Connection,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;

    /// Applies several messages, in the order given, through one connection of one
    /// transaction. Store-then-process workers call it for the rows of a claimed batch, and
    /// [`Processor::process_batch`](crate::Processor::process_batch) for the fresh messages of
    /// a batch.
    ///
    /// The default calls [`Handler::handle`] for each message in turn. Override it when one
    /// set-based statement can do the work of many (`UPDATE … FROM unnest($1)`): a batch of 100
    /// then costs one round trip instead of 100, which on a small machine is most of the cost of
    /// a short handler. The override must have the effect of handling each message in order.
    /// Concurrent batches hold their row locks until their commits, so lock business rows in
    /// a consistent order (by key, say), never in message order: two batches touching the same
    /// rows in different orders deadlock, and both are then redone one message at a time.
    ///
    /// Failure is all-or-nothing: on `Err` (or a panic, or the deadline) the caller rolls the
    /// whole call back and redoes the batch one message at a time with [`Handler::handle`], in
    /// a transaction each, so that one bad message fails alone. Its batch-mates' work is
    /// therefore done twice in that case, and only the second run can commit.
    ///
    /// Store-then-process workers call it only for a handler that declares it its own
    /// ([`Handler::BATCHES`]). They run the rows of any other through [`Handler::handle`], in
    /// groups that share a transaction, sized by contention (one row more after a group
    /// commits, half after one that met a lock or a deadlock): calling this default for a whole
    /// batch would hold every row's business locks until the batch commits, in the order the
    /// rows arrived, and concurrent batches would deadlock on them.
    fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut DB::Connection,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send {
        async move {
            for msg in msgs {
                self.handle(msg, conn).await?;
            }
            Ok(())
        }
    }
}

/// Calls the handler under `deadline`, with panics caught: neither may take the consumer down.
/// Both come back as transient failures, so the message is retried and, past its attempts,
/// dead-lettered.
pub(crate) async fn call_guarded<DB: Driver, H: Handler<DB>>(
    handler: &H,
    msg: &Envelope,
    conn: &mut DB::Connection,
    deadline: std::time::Duration,
) -> Result<(), HandlerError> {
    guarded(handler.handle(msg, conn), deadline).await
}

/// [`Handler::handle_batch`] under the same guard; the deadline is the per-message deadline
/// times the number of messages, since the default runs them one after another.
pub(crate) async fn call_guarded_batch<DB: Driver, H: Handler<DB>>(
    handler: &H,
    msgs: &[&Envelope],
    conn: &mut DB::Connection,
    deadline: std::time::Duration,
) -> Result<(), HandlerError> {
    let n = u32::try_from(msgs.len()).unwrap_or(u32::MAX);
    guarded(handler.handle_batch(msgs, conn), deadline.saturating_mul(n)).await
}

async fn guarded(
    run: impl Future<Output = Result<(), HandlerError>>,
    deadline: std::time::Duration,
) -> Result<(), HandlerError> {
    use futures_util::FutureExt;
    let run = std::panic::AssertUnwindSafe(run).catch_unwind();
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
