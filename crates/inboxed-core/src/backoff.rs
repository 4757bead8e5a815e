//! Exponential backoff with full jitter.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Exponential backoff: `base * 2^(n-1)`, capped at `max`, with full jitter so that workers
/// that failed together do not retry together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry, before jitter.
    pub base: Duration,
    /// Upper bound on any delay.
    pub max: Duration,
}

impl Backoff {
    /// Delay for a failure during an outage that has lasted `outage`: uniform in
    /// `[0, outage]`, kept within `[base, max]`.
    #[must_use]
    pub fn after_outage(&self, outage: Duration) -> Duration {
        outage
            .clamp(self.base, self.max.max(self.base))
            .mul_f64(fastrand::f64())
    }

    /// Delay before retry number `n` (1-based): uniform in `[0, min(max, base * 2^(n-1))]`.
    #[must_use]
    pub fn delay(&self, n: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << n.saturating_sub(1).min(20));
        let cap = std::cmp::min(exp, self.max);
        cap.mul_f64(fastrand::f64())
    }

    /// Runs `op` and, while it fails with an error `retry` accepts, runs it again after
    /// [`Backoff::delay`], at most `retries` more times: for an operation that a contention
    /// failure rolled back whole, so that running it again is safe.
    pub(crate) async fn retrying<T, F, Fut>(
        &self,
        retries: u32,
        retry: impl Fn(&crate::StoreError) -> bool,
        mut op: F,
    ) -> Result<T, crate::StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, crate::StoreError>>,
    {
        let mut n = 0;
        loop {
            match op().await {
                Err(e) if retry(&e) && n < retries => {
                    n += 1;
                    tokio::time::sleep(self.delay(n)).await;
                }
                other => return other,
            }
        }
    }
}

/// An outage seen by the tasks of one loop: when its first failure happened. A failure that is
/// not the message's fault (the database is down) waits about as long as the outage has lasted
/// ([`Backoff::after_outage`]), so retries thin out however many deliveries fail meanwhile and
/// whatever delivery count the broker keeps (some keep none).
#[derive(Debug, Default, Clone)]
pub struct FailureStreak(Arc<Mutex<Option<Instant>>>);

impl FailureStreak {
    /// Records a failure; returns how long the outage has lasted (zero at its first failure).
    pub fn failed(&self) -> Duration {
        let mut started = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match *started {
            Some(at) => at.elapsed(),
            None => {
                *started = Some(Instant::now());
                Duration::ZERO
            }
        }
    }

    /// Ends the outage.
    pub fn succeeded(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_under_the_cap() {
        let b = Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_millis(100),
        };
        for n in 1..40 {
            let d = b.delay(n);
            assert!(d <= Duration::from_millis(100), "{d:?}");
            assert!(d <= Duration::from_millis(10) * (1 << (n - 1).min(20)));
        }
    }

    #[test]
    fn an_outage_lasts_until_a_success() {
        let s = FailureStreak::default();
        let shared = s.clone();
        assert_eq!(s.failed(), Duration::ZERO, "the first failure starts it");
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            shared.failed() >= Duration::from_millis(20),
            "shared by clones"
        );
        s.succeeded();
        assert_eq!(shared.failed(), Duration::ZERO);
        let b = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        for _ in 0..100 {
            assert!(b.after_outage(Duration::from_secs(60)) <= Duration::from_secs(1));
            assert!(b.after_outage(Duration::ZERO) <= Duration::from_millis(100));
        }
    }
}
