//! Exponential backoff with full jitter.

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
}
