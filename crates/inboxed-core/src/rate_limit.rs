//! Rate limits: how fast a consumer or a worker hands messages to its handler, overall and per
//! key (a tenant, a downstream account).
//!
//! A permit is taken before the inbox transaction begins, never inside it: a message waiting for
//! its permit holds no connection and no lock. The overall limit is taken before a delivery (or a
//! claim) is taken at all, so the consumer simply reads more slowly and the broker keeps what is
//! not yet read. The per-key limit needs the message to know its key: a delivery over its key's
//! limit is handed back to the broker with the wait as its delay (deferred, not failed: it uses
//! up no attempt and never counts toward the kill switch), and a stored row is handed back with
//! its attempt given back and its `available_at` moved by the wait. An in-order delivery (Kafka)
//! cannot be handed back without holding up its partition, so it waits in place.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::envelope::Envelope;

/// How often the per-key limiter forgets keys whose limit has fully recovered, in checks: the
/// memory a limiter holds is then about the keys seen in the last period.
const FORGET_EVERY: u64 = 4096;

/// What decides a message's key for [`RateLimit::per_key`]; `None` leaves it unlimited by key.
type KeyOf = dyn Fn(&Envelope) -> Option<String> + Send + Sync;

/// How fast messages reach the handler: at most `n` per period overall, per key, or both
/// (module docs in `rate_limit.rs` say where each permit is taken). Clones share their limits,
/// so one value given to several configs limits them together; the default limits nothing.
///
/// A limit of `n` per period lets a burst of `n` through at once, then one every `period / n`
/// (the generic cell rate algorithm, by the `governor` crate).
///
/// ```
/// use std::time::Duration;
/// use inboxed_core::RateLimit;
///
/// // At most 100 messages a second, and 5 a second for any one tenant.
/// let limit = RateLimit::new(100, Duration::from_secs(1)).per_key(
///     5,
///     Duration::from_secs(1),
///     |envelope| envelope.aggregate_id().map(str::to_owned),
/// );
/// # let _ = limit;
/// ```
#[derive(Clone, Default)]
pub struct RateLimit {
    overall: Option<Arc<DefaultDirectRateLimiter>>,
    per_key: Option<Arc<PerKey>>,
}

struct PerKey {
    limiter: DefaultKeyedRateLimiter<String>,
    key: Box<KeyOf>,
    checks: AtomicU64,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("overall", &self.overall.is_some())
            .field("per_key", &self.per_key.is_some())
            .finish()
    }
}

/// `n` per `period`, as a burst of `n` and then one every `period / n` (`n` at least 1; a
/// period of zero is as short as the clock goes).
fn quota(n: u32, period: Duration) -> Quota {
    let n = NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
    let each = (period / n.get()).max(Duration::from_nanos(1));
    Quota::with_period(each).map_or_else(|| Quota::per_second(n), |q| q.allow_burst(n))
}

impl RateLimit {
    /// No limit: every message goes through as fast as the handler takes it (the default).
    #[must_use]
    pub fn none() -> Self {
        Self::default()
    }

    /// At most `n` messages per `period` overall.
    #[must_use]
    pub fn new(n: u32, period: Duration) -> Self {
        Self {
            overall: Some(Arc::new(RateLimiter::direct(quota(n, period)))),
            per_key: None,
        }
    }

    /// Also at most `n` messages per `period` for each key `key` gives (messages it gives no
    /// key are limited only overall). The key is read from the message, so this limit is
    /// checked once the message is in hand; see the module docs in `rate_limit.rs` for what
    /// happens to one over its limit.
    #[must_use]
    pub fn per_key(
        mut self,
        n: u32,
        period: Duration,
        key: impl Fn(&Envelope) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.per_key = Some(Arc::new(PerKey {
            limiter: RateLimiter::keyed(quota(n, period)),
            key: Box::new(key),
            checks: AtomicU64::new(0),
        }));
        self
    }

    /// Whether any limit is set.
    #[must_use]
    pub fn is_limited(&self) -> bool {
        self.overall.is_some() || self.per_key.is_some()
    }

    /// Whether a per-key limit is set (a message must then be read to know its key).
    pub(crate) fn limits_keys(&self) -> bool {
        self.per_key.is_some()
    }

    /// Takes between 1 and `want` permits of the overall limit, waiting for the first: as many
    /// as are at hand, so a batch is as large as the limit allows right now. A permit taken for
    /// a batch that did not fill is not given back (the limit errs on the slow side). Without
    /// an overall limit, `want` at once.
    pub(crate) async fn take(&self, want: usize) -> usize {
        let Some(limiter) = &self.overall else {
            return want;
        };
        loop {
            match limiter.check() {
                Ok(()) => break,
                Err(not_until) => {
                    let wait = not_until.wait_time_from(limiter.clock().now());
                    tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
                }
            }
        }
        let mut taken = 1;
        while taken < want && limiter.check().is_ok() {
            taken += 1;
        }
        taken
    }

    /// Takes a permit of `envelope`'s key, or says how long until it has one.
    pub(crate) fn check_key(&self, envelope: &Envelope) -> Result<(), Duration> {
        let Some(per_key) = &self.per_key else {
            return Ok(());
        };
        let Some(key) = (per_key.key)(envelope) else {
            return Ok(());
        };
        if per_key.checks.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1 {
            per_key.limiter.retain_recent();
        }
        per_key.limiter.check_key(&key).map_err(|not_until| {
            let wait = not_until.wait_time_from(per_key.limiter.clock().now());
            wait.max(Duration::from_millis(1))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::MessageId;

    fn message(key: &str) -> Envelope {
        let id = MessageId::from_uuid(uuid::Uuid::new_v4());
        Envelope::new(id, b"{}".to_vec()).with_aggregate(key)
    }

    fn by_aggregate(e: &Envelope) -> Option<String> {
        e.aggregate_id().map(str::to_owned)
    }

    #[tokio::test]
    async fn a_burst_then_one_permit_per_interval() {
        let limit = RateLimit::new(10, Duration::from_millis(200));
        // The burst: ten at once, and a batch takes what is at hand.
        assert_eq!(limit.take(4).await, 4);
        assert_eq!(limit.take(50).await, 6);
        // Then one every 20 ms: three more take at least 40 ms.
        let started = std::time::Instant::now();
        for _ in 0..3 {
            assert_eq!(limit.take(1).await, 1);
        }
        assert!(started.elapsed() >= Duration::from_millis(40));
    }

    #[tokio::test]
    async fn keys_are_limited_apart_and_unkeyed_messages_pass() {
        let limit = RateLimit::none().per_key(2, Duration::from_secs(60), by_aggregate);
        assert!(limit.check_key(&message("a")).is_ok());
        assert!(limit.check_key(&message("a")).is_ok());
        let wait = limit.check_key(&message("a")).expect_err("over a's limit");
        assert!(wait > Duration::from_secs(20) && wait <= Duration::from_secs(30));
        assert!(limit.check_key(&message("b")).is_ok());
        let unkeyed = Envelope::new(MessageId::from_uuid(uuid::Uuid::new_v4()), b"{}".to_vec());
        for _ in 0..10 {
            assert!(limit.check_key(&unkeyed).is_ok());
        }
        // No overall limit: whatever is asked for, at once.
        assert_eq!(limit.take(500).await, 500);
    }

    #[test]
    fn clones_share_one_limit() {
        let limit = RateLimit::none().per_key(1, Duration::from_secs(60), by_aggregate);
        let other = limit.clone();
        assert!(limit.check_key(&message("a")).is_ok());
        assert!(other.check_key(&message("a")).is_err());
        assert!(RateLimit::new(0, Duration::ZERO).is_limited());
        assert!(!RateLimit::default().is_limited());
    }
}
