//! Rate limits: how fast a consumer or a worker hands messages to its handler, overall and per
//! bucket (a tenant, a downstream account: whatever a function of the message says).
//!
//! A permit is taken before the handler's transaction begins (a lock-held worker checks a row's
//! bucket in its claim's transaction, before any handler runs): a message waiting for its permit
//! holds no connection and no lock. The overall limit is taken once a delivery is in hand and
//! before the batch it starts is settled, so the consumer reads more slowly and the broker keeps
//! what is not yet read. A message over its bucket's limit is handed back to the broker with a
//! delay (deferred, not failed: it uses up no attempt and never counts toward the kill switch),
//! and a stored row is handed back with its attempt given back and its `available_at` moved by
//! the delay. Each deferred message of a bucket gets a slot of its own, one permit's interval
//! after the last one given out, so that a bucket's backlog comes back spread out rather than
//! all at once to be deferred again: every deferral is a redelivery the broker counts
//! (RabbitMQ's `delivery-limit`, NATS `max_deliver`, SQS `maxReceiveCount`). An in-order
//! delivery (Kafka) cannot be handed back without holding up its partition, so it waits in
//! place.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::envelope::Envelope;

/// How often the per-bucket limiter forgets buckets whose limit has fully recovered, in checks:
/// the memory a limiter holds is then about the buckets seen in the last period.
const FORGET_EVERY: u64 = 4096;

/// What decides a message's bucket for [`RateLimit::per_bucket`]; `None` leaves it unlimited
/// but for the overall limit.
type BucketOf = dyn Fn(&Envelope) -> Option<String> + Send + Sync;

/// How fast messages reach the handler: at most `n` per period overall, per bucket, or both
/// (module docs in `rate_limit.rs` say where each permit is taken, and what happens to a
/// message over its bucket's limit). Clones share their limits, so one value given to several
/// configs limits them together; the default limits nothing.
///
/// A limit of `n` per period lets a burst of `n` through at once, then one every `period / n`
/// (the generic cell rate algorithm, by the `governor` crate).
///
/// ```
/// use std::time::Duration;
/// use inboxed_core::RateLimit;
///
/// // At most 100 messages a second, and 5 a second for any one tenant.
/// let limit = RateLimit::new(100, Duration::from_secs(1)).per_bucket(
///     5,
///     Duration::from_secs(1),
///     |envelope| envelope.aggregate_id().map(str::to_owned),
/// );
/// # let _ = limit;
/// ```
#[derive(Clone, Default)]
pub struct RateLimit {
    overall: Option<Arc<DefaultDirectRateLimiter>>,
    per_bucket: Option<Arc<PerBucket>>,
}

struct PerBucket {
    limiter: DefaultKeyedRateLimiter<String>,
    bucket: Box<BucketOf>,
    /// One permit's interval: `period / n`.
    interval: Duration,
    /// Per bucket, the slot after the last one a deferred message was given (`rate_limit.rs`
    /// says why); a slot in the past is forgotten.
    next_slot: Mutex<HashMap<String, Instant>>,
    checks: AtomicU64,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("overall", &self.overall.is_some())
            .field("per_bucket", &self.per_bucket.is_some())
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
            per_bucket: None,
        }
    }

    /// Also at most `n` messages per `period` for each bucket `bucket` names (a tenant, a
    /// downstream account; messages it names none for are limited only overall). The bucket is
    /// read from the message, so this limit is checked once the message is in hand.
    #[must_use]
    pub fn per_bucket(
        mut self,
        n: u32,
        period: Duration,
        bucket: impl Fn(&Envelope) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        let quota = quota(n, period);
        self.per_bucket = Some(Arc::new(PerBucket {
            limiter: RateLimiter::keyed(quota),
            bucket: Box::new(bucket),
            interval: quota.replenish_interval(),
            next_slot: Mutex::default(),
            checks: AtomicU64::new(0),
        }));
        self
    }

    /// Whether any limit is set: the consumer loop takes no permits without one.
    #[must_use]
    pub fn is_limited(&self) -> bool {
        self.overall.is_some() || self.per_bucket.is_some()
    }

    /// Whether a per-bucket limit is set (a message must then be read to know its bucket).
    pub(crate) fn limits_buckets(&self) -> bool {
        self.per_bucket.is_some()
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

    /// Takes a permit of `envelope`'s bucket, or says how long to wait for one. With `defer`
    /// the message is handed back for that long: it gets a slot of its own, one interval after
    /// the last deferred message of its bucket, so that a bucket's backlog comes back spread
    /// out. Without it (a wait in place, which checks again) the wait is until the next permit.
    pub(crate) fn check_bucket(&self, envelope: &Envelope, defer: bool) -> Result<(), Duration> {
        let Some(per_bucket) = &self.per_bucket else {
            return Ok(());
        };
        let Some(bucket) = (per_bucket.bucket)(envelope) else {
            return Ok(());
        };
        let forget =
            per_bucket.checks.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1;
        if forget {
            per_bucket.limiter.retain_recent();
        }
        let Err(not_until) = per_bucket.limiter.check_key(&bucket) else {
            return Ok(());
        };
        let wait = not_until
            .wait_time_from(per_bucket.limiter.clock().now())
            .max(Duration::from_millis(1));
        if !defer {
            return Err(wait);
        }
        let now = Instant::now();
        let mut slots = per_bucket
            .next_slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if forget {
            slots.retain(|_, next| *next > now);
        }
        let slot = slots
            .get(&bucket)
            .copied()
            .filter(|next| *next > now + wait)
            .unwrap_or(now + wait);
        slots.insert(bucket, slot + per_bucket.interval);
        Err(slot - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::MessageId;

    fn message(bucket: &str) -> Envelope {
        let id = MessageId::from_uuid(uuid::Uuid::new_v4());
        Envelope::new(id, b"{}".to_vec()).with_aggregate(bucket)
    }

    fn by_aggregate(e: &Envelope) -> Option<String> {
        e.aggregate_id().map(str::to_owned)
    }

    #[tokio::test]
    async fn a_burst_then_one_permit_per_interval() {
        let limit = RateLimit::new(10, Duration::from_millis(200));
        // The burst: ten at once, and a batch takes what is at hand (one more may have come
        // in the meantime on a loaded machine).
        assert_eq!(limit.take(4).await, 4);
        assert!((6..=7).contains(&limit.take(50).await));
        // Then one every 20 ms: three more take at least 40 ms.
        let started = std::time::Instant::now();
        for _ in 0..3 {
            assert_eq!(limit.take(1).await, 1);
        }
        assert!(started.elapsed() >= Duration::from_millis(40));
    }

    #[tokio::test]
    async fn buckets_are_limited_apart_and_messages_without_one_pass() {
        let limit = RateLimit::none().per_bucket(2, Duration::from_secs(60), by_aggregate);
        assert!(limit.check_bucket(&message("a"), true).is_ok());
        assert!(limit.check_bucket(&message("a"), true).is_ok());
        let wait = limit
            .check_bucket(&message("a"), false)
            .expect_err("over a's limit");
        assert!(wait > Duration::from_secs(20) && wait <= Duration::from_secs(30));
        assert!(limit.check_bucket(&message("b"), true).is_ok());
        let none = Envelope::new(MessageId::from_uuid(uuid::Uuid::new_v4()), b"{}".to_vec());
        for _ in 0..10 {
            assert!(limit.check_bucket(&none, true).is_ok());
        }
        // No overall limit: whatever is asked for, at once.
        assert_eq!(limit.take(500).await, 500);
    }

    #[test]
    fn deferred_messages_of_a_bucket_get_slots_an_interval_apart() {
        // One permit every 100 ms: the first goes, then three deferred get the next three
        // slots rather than all the first.
        let limit = RateLimit::none().per_bucket(1, Duration::from_millis(100), by_aggregate);
        assert!(limit.check_bucket(&message("a"), true).is_ok());
        let waits: Vec<Duration> = (0..3)
            .map(|_| {
                limit
                    .check_bucket(&message("a"), true)
                    .expect_err("deferred")
            })
            .collect();
        for (i, wait) in waits.iter().enumerate() {
            let slot = Duration::from_millis(100 * (i as u64 + 1));
            assert!(
                *wait <= slot && *wait + Duration::from_millis(80) >= slot,
                "{waits:?}"
            );
        }
        // A wait in place takes no slot.
        let in_place = limit.check_bucket(&message("a"), false).expect_err("over");
        assert!(in_place <= Duration::from_millis(100), "{in_place:?}");
    }

    #[test]
    fn clones_share_one_limit() {
        let limit = RateLimit::none().per_bucket(1, Duration::from_secs(60), by_aggregate);
        let other = limit.clone();
        assert!(limit.check_bucket(&message("a"), true).is_ok());
        assert!(other.check_bucket(&message("a"), true).is_err());
        assert!(RateLimit::new(0, Duration::ZERO).is_limited());
        assert!(!RateLimit::default().is_limited());
    }
}
