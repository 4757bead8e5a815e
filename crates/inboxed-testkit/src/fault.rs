//! The user's handler, shared by every processor a check makes, with the fault a check injects
//! around it. The fault always comes *after* the user's handler has run and returned `Ok`: what
//! a check then sees is what the handler's work does when its transaction does not commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use inboxed_core::driver::Driver;
use inboxed_core::{Envelope, Handler, HandlerError};
use tokio::sync::Notify;

/// What happens after the user's handler returns `Ok`.
#[derive(Debug, Clone)]
pub(crate) enum Fault {
    /// Nothing: the processor goes on to commit.
    None,
    /// The task is killed there: the handler's call reports on `ran` and never returns, and
    /// the check drops the delivery, so its transaction is rolled back by the pool, as a
    /// process killed before its COMMIT would have it rolled back by the server.
    Hang { ran: Arc<Notify> },
    /// The call reports on `ran`, then waits for `go` and returns `Ok`: a handler still running
    /// while the check expires its lease.
    Wait { ran: Arc<Notify>, go: Arc<Notify> },
    /// The call sleeps this long, then returns `Ok`: a transaction held open after its
    /// handler, so that concurrent ones overlap however fast the handler is.
    Hold(Duration),
    /// Every call fails as a transient error: the poison a message becomes when something
    /// after the handler always fails (a commit refused, a downstream check).
    Fail,
    /// Every `handle_batch` call fails after the user's returned `Ok` (counted in `failed`);
    /// `handle` does not: the processor redoes the batch a message at a time.
    FailBatches { failed: Arc<AtomicU32> },
    /// The first call to get here waits `hold` (while the other copies queue behind its
    /// claim), then fails: its transaction rolls back and one of the others takes the key.
    FirstFails {
        first: Arc<AtomicBool>,
        hold: Duration,
    },
}

impl Fault {
    /// A [`Fault::Hang`], and the `ran` it reports on.
    pub(crate) fn hang() -> (Self, Arc<Notify>) {
        let ran = Arc::new(Notify::new());
        (
            Self::Hang {
                ran: Arc::clone(&ran),
            },
            ran,
        )
    }
}

/// The user's handler `H` behind an `Arc`, with a [`Fault`].
pub(crate) struct Faulty<H> {
    pub(crate) inner: Arc<H>,
    pub(crate) fault: Fault,
}

impl<DB: Driver, H: Handler<DB>> Handler<DB> for Faulty<H> {
    const BATCHES: bool = H::BATCHES;

    async fn handle(&self, msg: &Envelope, conn: &mut DB::Connection) -> Result<(), HandlerError> {
        self.inner.handle(msg, conn).await?;
        self.after(false).await
    }

    /// The user's own `handle_batch` (their override, or the trait's default), then the fault
    /// once for the whole batch.
    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut DB::Connection,
    ) -> Result<(), HandlerError> {
        self.inner.handle_batch(msgs, conn).await?;
        self.after(true).await
    }
}

impl<H> Faulty<H> {
    /// The fault, after the user's handler returned `Ok` (from `handle_batch` when `batch`).
    async fn after(&self, batch: bool) -> Result<(), HandlerError> {
        match &self.fault {
            Fault::None => Ok(()),
            Fault::Hang { ran } => {
                ran.notify_one();
                std::future::pending().await
            }
            Fault::Wait { ran, go } => {
                ran.notify_one();
                go.notified().await;
                Ok(())
            }
            Fault::Hold(hold) => {
                tokio::time::sleep(*hold).await;
                Ok(())
            }
            Fault::Fail => Err(HandlerError::transient(
                "inboxed-testkit: injected failure after the handler returned Ok",
            )),
            Fault::FailBatches { failed } if batch => {
                failed.fetch_add(1, Ordering::SeqCst);
                Err(HandlerError::transient(
                    "inboxed-testkit: injected failure after handle_batch returned Ok",
                ))
            }
            Fault::FailBatches { .. } => Ok(()),
            Fault::FirstFails { first, hold } => {
                if first.swap(false, Ordering::SeqCst) {
                    tokio::time::sleep(*hold).await;
                    Err(HandlerError::transient(
                        "inboxed-testkit: the first holder of the key rolls back",
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// Waits until `task`'s handler reports on `ran`, then kills the task there (it is dropped, and
/// its transaction rolled back, as a killed process's is by the server). A task that ends
/// first (its handler failed before it returned `Ok`) has nothing to kill.
pub(crate) async fn kill_when_ran<T>(ran: &Notify, mut task: tokio::task::JoinHandle<T>) {
    tokio::select! {
        () = ran.notified() => {
            task.abort();
            let _ = task.await;
        }
        _ = &mut task => {}
    }
}
