//! Tells the store which kill switches are open, so that `inboxed stats` and the console can say
//! a consumer is paused: a row while the switch is open, refreshed every 30 s (a process that
//! died stops refreshing its row, and the reads leave it out after 3 minutes), deleted when it
//! closes or the run ends. Writes happen only when the switch changes and while it is open: a
//! switch that never opens costs nothing.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tracing::debug;

use super::KillSwitch;
use crate::envelope::ConsumerName;
use crate::error::error_chain;
use crate::store::Store;

/// How often an open switch's row is written again; observe_switches.sql leaves out a row older
/// than six of these.
const REFRESH: Duration = Duration::from_secs(30);

/// How long the end of a run waits to delete its switch's row.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Runs `work`, meanwhile reporting `switch` to `store` under `consumer`; when `work` ends,
/// deletes the row written, if any.
pub(crate) async fn reporting<S: Store, T>(
    switch: &KillSwitch,
    store: &S,
    consumer: &ConsumerName,
    work: impl Future<Output = T>,
) -> T {
    if !switch.is_on() {
        return work.await;
    }
    let written = AtomicBool::new(false);
    let report = report(switch, store, consumer, &written);
    tokio::pin!(work);
    tokio::pin!(report);
    let out = tokio::select! {
        out = &mut work => out,
        never = &mut report => match never {},
    };
    if written.load(Ordering::Relaxed) {
        let closing = store.report_switch(consumer, switch.id(), None);
        match tokio::time::timeout(CLOSE_WAIT, closing).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                debug!(error = error_chain(&e), %consumer, "could not delete the kill switch's row; the reads leave it out after 3 minutes");
            }
            Err(_) => debug!(%consumer, "deleting the kill switch's row took too long"),
        }
    }
    out
}

/// Writes the switch's state each time it changes, and every [`REFRESH`] while it is open or a
/// write failed. `written`: a row of this switch may be in the store.
async fn report<S: Store>(
    switch: &KillSwitch,
    store: &S,
    consumer: &ConsumerName,
    written: &AtomicBool,
) -> Infallible {
    let mut opened = switch.watch_opened();
    loop {
        let now = *opened.borrow_and_update();
        let mut failed = false;
        if now.is_some() || written.load(Ordering::Relaxed) {
            // Marked before the write: a run that ends while it is in flight still deletes.
            if now.is_some() {
                written.store(true, Ordering::Relaxed);
            }
            match store.report_switch(consumer, switch.id(), now).await {
                Ok(()) => written.store(now.is_some(), Ordering::Relaxed),
                Err(e) => {
                    // The store may be what is down: the next refresh tries again.
                    debug!(error = error_chain(&e), %consumer, "could not record the kill switch's state");
                    failed = true;
                }
            }
        }
        if now.is_some() || failed {
            let _ = tokio::time::timeout(REFRESH, opened.changed()).await;
        } else if opened.changed().await.is_err() {
            // The switch is gone (it cannot be while borrowed here): nothing more to report.
            return std::future::pending().await;
        }
    }
}
