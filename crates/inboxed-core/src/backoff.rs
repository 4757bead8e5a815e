//! Exponential backoff with full jitter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

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
    /// Delay before retry number `n` (1-based): uniform in `[0, min(max, base * 2^(n-1))]`.
    #[must_use]
    pub fn delay(&self, n: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << n.saturating_sub(1).min(20));
        let cap = std::cmp::min(exp, self.max);
        cap.mul_f64(fastrand::f64())
    }
}

/// Consecutive failures shared by the tasks of one loop. A failure that carries no count of its
/// own (the database is down, and the broker keeps no delivery count) takes its backoff step
/// from here, so requeues wait longer the longer an outage lasts instead of cycling hot.
#[derive(Debug, Default, Clone)]
pub struct FailureStreak(Arc<AtomicU32>);

impl FailureStreak {
    /// Records a failure; returns the streak's length, this failure included.
    pub fn failed(&self) -> u32 {
        self.0.fetch_add(1, Ordering::Relaxed).saturating_add(1)
    }

    /// Ends the streak.
    pub fn succeeded(&self) {
        self.0.store(0, Ordering::Relaxed);
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
    fn a_streak_counts_until_a_success() {
        let s = FailureStreak::default();
        let shared = s.clone();
        assert_eq!((s.failed(), shared.failed()), (1, 2));
        s.succeeded();
        assert_eq!(shared.failed(), 1);
    }
}
