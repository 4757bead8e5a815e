//! The reaper: returns rows whose lease expired (their worker crashed, hung or lost its
//! connection) to pending, or to dead once their attempts are used up.

use std::future::Future;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use super::store::{InboxStore, ReleaseStaleParams};
use crate::error::Error;
use crate::metrics as m;

/// Settings for [`Reaper`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReaperConfig {
    /// Time between passes. Defaults to 10 s.
    pub interval: Duration,
    /// Rows at this many attempts go dead instead of pending; use the workers' value.
    /// Defaults to 5.
    pub max_attempts: u32,
    /// Rows per statement; a pass repeats until a batch comes back short. Defaults to 1,000.
    pub batch_size: u32,
}

impl Default for ReaperConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10),
            max_attempts: 5,
            batch_size: 1_000,
        }
    }
}

impl ReaperConfig {
    /// Sets [`ReaperConfig::max_attempts`] (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets [`ReaperConfig::interval`].
    #[must_use]
    pub fn interval(mut self, every: Duration) -> Self {
        self.interval = every;
        self
    }
}

/// Returns expired claims, for every consumer of the store.
#[derive(Debug, Clone)]
pub struct Reaper<S> {
    store: S,
    config: ReaperConfig,
}

impl<S: InboxStore> Reaper<S> {
    /// A reaper over `store`.
    pub fn new(store: S, config: ReaperConfig) -> Self {
        Self { store, config }
    }

    /// One pass, as of `now` (`None`: the database clock). Returns how many rows it returned.
    ///
    /// # Errors
    /// A store failure.
    pub async fn reap_once(&self, now: Option<SystemTime>) -> Result<u64, Error> {
        let batch = self.config.batch_size.max(1);
        let params = ReleaseStaleParams {
            max_attempts: self.config.max_attempts,
            limit: batch,
            now,
        };
        let mut total = 0;
        loop {
            let n = self.store.release_stale(&params).await?;
            total += n;
            if n < u64::from(batch) {
                break;
            }
        }
        if total > 0 {
            info!(rows = total, "reaper returned expired claims");
            metrics::counter!(m::LEASES_EXPIRED_TOTAL).increment(total);
        }
        Ok(total)
    }

    /// Runs a pass every `interval` until `shutdown` resolves.
    pub async fn run(&self, shutdown: impl Future<Output = ()> + Send) {
        tokio::pin!(shutdown);
        loop {
            if let Err(e) = self.reap_once(None).await {
                warn!(error = %e, "reaper pass failed");
            }
            let pause = self.config.interval.mul_f64(0.75 + fastrand::f64() / 2.0);
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}
