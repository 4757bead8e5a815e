//! What a crash is charged to. A process killed mid-delivery charges an attempt to every
//! delivery (and claimed row) it held, guilty or not: nothing durable says which one killed
//! it. Left at that, one message that aborts its consumer uses up the attempts of every
//! message that happened to be in flight beside it, crash after crash, and they are
//! dead-lettered with it. So work tried before and not seen to fail here (a suspect: the last
//! crash may have been its doing) waits until nothing else of its process is in flight and
//! runs alone, its attempt forgiven while it waits: its next crash is charged to it only, and
//! the others (where the store counts attempts) are charged for the one crash they shared
//! with it, not for the ones after. It is judged so in a process's first minute ([`YOUNG`]).
//! Everything else runs side by side, holding the lock shared.
//!
//! One lock for the whole process, because a crash takes all of it down: the processor's
//! deliveries, its batches and the store-then-process workers' batches.

use std::collections::{HashMap, VecDeque};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::store::KeyParams;

/// Held shared by every delivery, batch and worker batch of this process from the count of
/// its attempt to its end, and exclusively by a suspect.
pub(crate) static IN_FLIGHT: LazyLock<RwLock<()>> = LazyLock::new(|| RwLock::new(()));

/// What this process saw of every consumer's keys (see [`Seen`]): process-wide, as a crash
/// is, so that two processors of one consumer in a process see each other's deliveries.
pub(crate) static SEEN: LazyLock<Seen> = LazyLock::new(Seen::default);

/// A delivery's place among the others of its process while it runs.
#[derive(Debug)]
pub(crate) enum Turn {
    /// Beside the others.
    Shared(#[allow(dead_code, reason = "held, not read")] RwLockReadGuard<'static, ()>),
    /// Alone: a crash now is this delivery's.
    Alone(#[allow(dead_code, reason = "held, not read")] RwLockWriteGuard<'static, ()>),
}

/// How long after its start a process judges redeliveries as suspects. A crash loop shows as
/// restarts: the redeliveries a restarted consumer receives come at once, and a poison among
/// them is judged while the process is young. Past it, a redelivery is a retry from another
/// process more often than the aftermath of a crash (a downstream outage sends every retry
/// to whichever replica takes it), and judging it would drain the process for each: a
/// long-running process lets a crash charge what it held once, then restarts young.
const YOUNG: Duration = Duration::from_secs(60);

/// When this process started consuming: its first processor was made ([`started`]).
static STARTED: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Whether this process is within [`YOUNG`] of its start.
pub(crate) fn young() -> bool {
    STARTED.elapsed() < YOUNG
}

/// Marks the process's start (the first call wins): called as a processor is made, so that
/// a process's age runs from when it began consuming, not from its first redelivery.
pub(crate) fn started() {
    LazyLock::force(&STARTED);
}

/// What this process saw of consumers' keys (`consumer` and message id): the deliveries of each in flight here, and the
/// keys whose last attempt failed here where it could be seen (an error, a rollback, a lock
/// wait given up), with that attempt's number. A delivery whose earlier attempt is one of
/// those is not a suspect: another copy still running beside it (a crash would take both),
/// or a retry that comes next after a failure seen. Bounded: past [`Seen::KEPT`] failed keys
/// the oldest is forgotten, and its redelivery taken for a suspect, which costs it a turn
/// alone, never an attempt.
#[derive(Debug, Default)]
pub(crate) struct Seen(Mutex<Recent>);

#[derive(Debug, Default)]
struct Recent {
    running: HashMap<String, u32>,
    failed: HashMap<String, u32>,
    order: VecDeque<String>,
}

/// A delivery of a key counted as in flight here until dropped.
#[derive(Debug)]
pub(crate) struct Running<'a> {
    seen: &'a Seen,
    key: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut recent = self.seen.lock();
        if let Some(n) = recent.running.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                recent.running.remove(&self.key);
            }
        }
    }
}

impl Seen {
    const KEPT: usize = 10_000;

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a delivery of `key` in flight here until the guard is dropped.
    pub(crate) fn running(&self, key: &KeyParams<'_>) -> Running<'_> {
        let key = joined(key);
        *self.lock().running.entry(key.clone()).or_default() += 1;
        Running { seen: self, key }
    }

    /// Remembers that `key`'s attempt `attempt` failed visibly here.
    pub(crate) fn failed(&self, key: &KeyParams<'_>, attempt: u32) {
        let key = joined(key);
        let mut recent = self.lock();
        if recent.failed.insert(key.clone(), attempt).is_none() {
            recent.order.push_back(key);
            if recent.order.len() > Self::KEPT
                && let Some(oldest) = recent.order.pop_front()
            {
                recent.failed.remove(&oldest);
            }
        }
    }

    /// Whether attempt `attempt` of `key` (one after the first, itself [`Seen::running`]) may
    /// follow a crash: no other delivery of the key is in flight here, and no attempt of it
    /// was seen to fail here, or one was and more were made since.
    pub(crate) fn suspect(&self, key: &KeyParams<'_>, attempt: u32) -> bool {
        let key = joined(key);
        let recent = self.lock();
        recent.running.get(&key).is_none_or(|&n| n <= 1)
            && recent
                .failed
                .get(&key)
                .is_none_or(|&seen| seen + 1 != attempt)
    }
}

/// A key as one string: the consumer, a NUL (which a consumer name cannot hold), the id.
fn joined(key: &KeyParams<'_>) -> String {
    format!("{}\0{}", key.consumer.as_str(), key.message_id.as_str())
}

#[cfg(test)]
mod tests {
    use super::Seen;
    use crate::envelope::{ConsumerName, MessageId};
    use crate::store::KeyParams;

    fn key<'a>(consumer: &'a ConsumerName, id: &'a MessageId) -> KeyParams<'a> {
        KeyParams {
            consumer,
            message_id: id,
        }
    }

    #[test]
    fn a_retry_after_a_failure_seen_here_is_not_a_suspect() {
        let seen = Seen::default();
        let (c, other) = (
            ConsumerName::new("c").unwrap(),
            ConsumerName::new("d").unwrap(),
        );
        let a = MessageId::new("a").unwrap();
        assert!(
            seen.suspect(&key(&c, &a), 2),
            "nothing seen: a crash may have come first"
        );
        seen.failed(&key(&c, &a), 1);
        assert!(
            !seen.suspect(&key(&c, &a), 2),
            "the attempt after the one seen to fail"
        );
        assert!(
            seen.suspect(&key(&c, &a), 3),
            "another attempt came between"
        );
        assert!(seen.suspect(&key(&other, &a), 2), "another consumer's key");
        for i in 0..Seen::KEPT {
            seen.failed(&key(&c, &MessageId::new(format!("k{i}")).unwrap()), 1);
        }
        assert!(seen.suspect(&key(&c, &a), 2), "forgotten past the bound");
    }

    #[test]
    fn a_copy_beside_one_running_here_is_not_a_suspect() {
        let seen = Seen::default();
        let (c, b) = (
            ConsumerName::new("c").unwrap(),
            MessageId::new("b").unwrap(),
        );
        let first = seen.running(&key(&c, &b));
        let second = seen.running(&key(&c, &b));
        assert!(
            !seen.suspect(&key(&c, &b), 2),
            "its earlier attempt is running here"
        );
        drop(first);
        assert!(seen.suspect(&key(&c, &b), 2), "alone again");
        drop(second);
        assert!(seen.lock().running.is_empty());
    }
}
