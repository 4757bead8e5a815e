//! The batch check: the handler's `handle_batch` (its override, or the trait's default) through
//! `Processor::process_batch`, attacked as the single-message checks attack `handle`.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use inboxed_core::{Envelope, Handler, Processor, Store};

use crate::failure::CheckFailure;
use crate::fault::{Fault, kill_when_ran};
use crate::kit::{Kit, settle};

impl<S, H, T> Kit<S, H, T>
where
    S: Store + Clone + Send + Sync + 'static,
    H: Handler<S::Db>,
    T: PartialEq + Debug + Send + 'static,
{
    /// `msgs` (at least two distinct messages) processed as one batch through
    /// [`Processor::process_batch`], which hands the fresh ones to the handler's
    /// `handle_batch` in one transaction, compared with the same messages processed one at a
    /// time, under three attacks, each from a reset:
    ///
    /// - every message twice in the batch, the first one processed before: duplicates;
    /// - the batch's task killed after `handle_batch` returned, before the commit; then the
    ///   batch delivered again;
    /// - `handle_batch` failing after it returned `Ok`: the batch rolls back, and the processor
    ///   redoes each message alone with `handle`.
    ///
    /// A handler without a `handle_batch` of its own is checked through the trait's default
    /// (`handle` for each message in turn), which is what the processor runs for it.
    ///
    /// # Errors
    /// A batch's state differs from the one-at-a-time state.
    pub async fn batches(&self, msgs: &[Envelope]) -> Result<(), CheckFailure> {
        const CHECK: &str = "batches";
        if msgs.len() < 2 {
            return Err(CheckFailure::broken(
                CHECK,
                "a batch needs at least two distinct messages",
            ));
        }
        self.reset(CHECK).await?;
        let p = self.processor(CHECK, Fault::None);
        for msg in msgs {
            settle(CHECK, &p, msg, 1).await?;
        }
        let sequential = self.probe(CHECK).await?;

        self.reset(CHECK).await?;
        let p = self.processor(CHECK, Fault::None);
        settle(CHECK, &p, &msgs[0], 1).await?;
        let twice: Vec<Envelope> = msgs.iter().chain(msgs).cloned().collect();
        settle_batch(CHECK, &p, &twice).await?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a batch holding each message twice, the first processed before, leaves the state \
             the messages leave one at a time",
            &sequential,
            &found,
            "handle_batch does not have the effect of handling each message in order (as \
             `handle` does), or its work bypasses `conn`",
        )?;

        self.reset(CHECK).await?;
        let consumer = self.consumer(CHECK);
        let (hang, ran) = Fault::hang();
        let killed = self.processor_on(self.store.clone(), &consumer, hang);
        let batch = msgs.to_vec();
        let task = tokio::spawn(async move { killed.process_batch(&batch).await });
        kill_when_ran(&ran, task).await;
        let p = self.processor_on(self.store.clone(), &consumer, Fault::None);
        settle_batch(CHECK, &p, msgs).await?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a batch killed after handle_batch returned, before its commit, then delivered \
             again, leaves the state the messages leave one at a time",
            &sequential,
            &found,
            "handle_batch writes outside the transaction it is given (a second connection, its \
             own COMMIT, a call out, a counter in memory), so the killed batch's work stayed",
        )?;

        self.reset(CHECK).await?;
        let failed = Arc::new(AtomicU32::new(0));
        let p = self.processor(
            CHECK,
            Fault::FailBatches {
                failed: Arc::clone(&failed),
            },
        );
        settle_batch(CHECK, &p, msgs).await?;
        if failed.load(Ordering::SeqCst) == 0 {
            return Err(CheckFailure::broken(
                CHECK,
                "handle_batch was never called: the processor took the messages one at a time",
            ));
        }
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a batch whose handle_batch failed after it returned Ok, redone a message at a \
             time, leaves the state the messages leave one at a time",
            &sequential,
            &found,
            "handle_batch writes outside the transaction it is given, so its work stayed when \
             the batch rolled back and each message was done again by `handle`",
        )
    }
}

/// Delivers `batch` through `process_batch`; a message that failed is delivered again alone
/// until it settles.
async fn settle_batch<S: Store, H: Handler<S::Db>>(
    check: &'static str,
    p: &Processor<S, H>,
    batch: &[Envelope],
) -> Result<(), CheckFailure> {
    let results = p.process_batch(batch).await;
    for (msg, result) in batch.iter().zip(results) {
        match result {
            Ok(_) => {}
            Err(e) if e.is_transient() => {
                settle(check, p, msg, 2).await?;
            }
            Err(e) => return Err(CheckFailure::failed_for_good(check, &e)),
        }
    }
    Ok(())
}
