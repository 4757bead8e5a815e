//! The reaper: returns rows whose claim died to pending, or to dead once their attempts are
//! used up. A registered worker that died (its database session ended) has its rows returned
//! at the next pass; any other claim, when its lease expires (its worker crashed, hung or lost
//! its connection).

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
    /// Time between passes, with jitter (0.75 to 1.25 times): how long the rows of a worker
    /// whose database session ended wait to be returned. Expired leases are found by the same
    /// passes. Defaults to 2 s (a pass that finds nothing is two index probes).
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
            interval: Duration::from_secs(2),
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

    /// Sets [`ReaperConfig::batch_size`].
    #[must_use]
    pub fn batch_size(mut self, batch_size: u32) -> Self {
        self.batch_size = batch_size;
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
        let dead = self.store.dead_workers().await?;
        let params = ReleaseStaleParams {
            max_attempts: self.config.max_attempts,
            limit: batch,
            now,
            dead_workers: &dead,
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
            info!(rows = total, dead_workers = ?dead, "reaper returned claims that died");
            metrics::counter!(m::LEASES_EXPIRED_TOTAL).increment(total);
        }
        if !dead.is_empty() {
            // Only after their rows are back: a registration forgotten first would leave
            // them to their leases if this pass failed half-way.
            self.store.forget_workers(&dead).await?;
            metrics::counter!(m::DEAD_WORKERS_TOTAL).increment(dead.len() as u64);
        }
        Ok(total)
    }

    /// Runs a pass every `interval` until `shutdown` resolves.
    pub async fn run(&self, shutdown: impl Future + Send) {
        tokio::pin!(shutdown);
        loop {
            if let Err(e) = self.reap_once(None).await {
                warn!(error = %e, "reaper pass failed");
            }
            let pause = self.config.interval.mul_f64(0.75 + fastrand::f64() / 2.0);
            tokio::select! {
                _ = &mut shutdown => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}
