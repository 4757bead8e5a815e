//! Stopping on a supervisor's signal: the first SIGTERM or SIGINT asks the daemon to stop
//! taking work and hand back or finish what it holds; a second one exits at once.

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tracing::{info, warn};

/// Whether a stop was asked for, shared by the parts of one daemon (its waits for a
/// dependency, its loops, its HTTP server).
#[derive(Debug, Clone)]
pub(crate) struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Listens for SIGTERM and SIGINT from now on; call it first, so that a signal sent while
    /// the daemon starts is not the default action (death without a drain). `component` is
    /// what the log names.
    ///
    /// # Errors
    /// When the signal handlers cannot be installed.
    pub(crate) fn listen(component: &'static str) -> anyhow::Result<Self> {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let first = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            info!(
                component,
                signal = first,
                "shutting down: no new work; what is held is finished or handed back (a second signal exits at once)"
            );
            let _ = tx.send(true);
            let (code, second) = tokio::select! {
                _ = term.recv() => (143, "SIGTERM"),
                _ = int.recv() => (130, "SIGINT"),
            };
            warn!(component, signal = second, "second signal: exiting at once");
            std::process::exit(code);
        });
        Ok(Self(rx))
    }

    /// Resolves once a stop was asked for.
    pub(crate) fn requested(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.0.clone();
        async move {
            // An error is the listener gone, which only a runtime shutting down does.
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }
}
