//! Waiting for a dependency that is not up yet: a daemon started before its database or its
//! broker (a host booting, a deployment's pods in any order) tries again with backoff, saying
//! in its log and on `/health` what it waits for, instead of exiting for a supervisor to
//! restart it.

use std::future::Future;
use std::time::Duration;

use tracing::warn;

use inboxed_core::Backoff;

use super::Shutdown;
use super::status::Status;

/// Between tries: 100 ms doubling to 10 s, with jitter.
const BACKOFF: Backoff = Backoff {
    base: Duration::from_millis(100),
    max: Duration::from_secs(10),
};

/// How long a stop waits for the connection attempt in flight to end.
const ATTEMPT_GRACE: Duration = Duration::from_secs(1);

/// Calls `connect` until it succeeds, or `None` once a stop is asked for. Every failure is
/// retried, a refused password too: a daemon cannot tell a credential being rotated from a
/// wrong one, and says which it is waiting on.
pub(crate) async fn until_up<T, F, Fut>(
    what: &'static str,
    status: &Status,
    shutdown: &Shutdown,
    mut connect: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let mut tries = 0;
    loop {
        let connecting = connect();
        tokio::pin!(connecting);
        let attempt = tokio::select! {
            attempt = &mut connecting => attempt,
            () = shutdown.requested() => {
                // An attempt dropped half-way can leave a client's own thread (lapin's IO
                // loop) polling tasks of a runtime about to go, which panics in the log as
                // the process exits: let it end first, within a bound.
                let _ = tokio::time::timeout(ATTEMPT_GRACE, connecting).await;
                return None;
            }
        };
        match attempt {
            Ok(up) => {
                if tries > 0 {
                    tracing::info!(tries, "{what} is up");
                }
                return Some(up);
            }
            Err(e) => {
                tries += 1;
                let delay = BACKOFF.delay(tries);
                warn!(error = %format!("{e:#}"), tries, ?delay, "waiting for {what}");
                status.waiting_for(what, &e);
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shutdown.requested() => return None,
                }
            }
        }
    }
}
