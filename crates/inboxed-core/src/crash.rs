//! Crash attribution: what a crash is charged to.
//!
//! A process killed mid-work charges an attempt to everything it held, guilty or not: nothing
//! durable says which delivery killed it. Left at that, one message that aborts its consumer
//! uses up the attempts of every message in flight beside it, crash after crash, and they are
//! dead-lettered with it. [`CrashAttribution`] keeps that from happening with one rule:
//!
//! > Work that may have caused the last crash (a *suspect*) waits until nothing but suspects
//! > runs in its scope, and runs in their group, forgiven; a crash of a group halves the
//! > next group of each of its members; a suspect alone is charged for its crash.
//!
//! The redeliveries a restart hands back run together, as fast as they came, and a poison
//! among them is halved down to a group of one in a few crashes, each charged to no one, then
//! charged alone; the others are charged for the one crash they shared with it, not for the
//! ones after. Everything else runs side by side. The group size of a delivery is
//! 8 (the consumer's default concurrency) halved for each time it was forgiven; rows run alone (the
//! store's crash halving sizes their batches). A suspect is:
//! - for the processor, a delivery tried before (attempt above 1), within the scope's
//!   [window](CrashAttribution::window) of its start, with no other copy of its key running
//!   in the scope and no failure of its last attempt seen in the scope (a retry after a failure
//!   seen here is not the aftermath of a crash);
//! - for a store-then-process worker or the outbox relay, a batch holding rows whose earlier
//!   claim died: the store's *crash halving* has marked them (docs/guarantees.md), so no window
//!   applies.
//!
//! The scope is the value: every processor, worker and relay given the same
//! `CrashAttribution` (a clone) is judged together. A crash takes a whole process, so one
//! value shared by all the consumers of a process is the exact scope; each config's default
//! makes its own, so that a suspect of one consumer does not hold back another.
//! [`CrashAttribution::off`] charges every delivery in flight at a crash, as most job queues do.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use crate::metrics as m;
use crate::store::KeyParams;

/// Decides what a crash is charged to (see the [module](self) documentation): a scope of
/// work judged together, shared by clones.
///
/// Given to a [`ProcessorConfig`](crate::ProcessorConfig),
/// [`WorkerConfig`](crate::inbox::WorkerConfig) or
/// [`OutboxRelayConfig`](crate::outbox::OutboxRelayConfig); each of their defaults makes a
/// new one. Give every config of a process the same value (a clone) to judge all of its work
/// together, which is exact (a crash takes all of it down) at the price of one consumer's
/// suspect holding back the others while it runs.
#[derive(Debug, Clone)]
pub struct CrashAttribution {
    /// This scope's name: `<pid>-<nonce>` (pids are reused, across restarts and hosts), the
    /// first part of the id of each worker and relay of the scope, as written to the rows they
    /// claim (`claimed_by`). The reapers judge the rows of one scope together (the crash
    /// halving), as this value judges its work: what one sees held alone, the other ran alone.
    id: Arc<str>,
    scope: Option<Arc<Scope>>,
}

#[derive(Debug)]
pub(crate) struct Scope {
    /// Held shared by all work of the scope while it runs, exclusively by a group of suspects.
    lock: Arc<RwLock<()>>,
    /// The group of suspects running now, holding `lock` exclusively.
    group: Mutex<Option<Group>>,
    /// Told when a group opens, for suspects that may join it.
    opened: tokio::sync::Notify,
    window: Duration,
    /// When the first processor, worker or relay of the scope was made.
    started: OnceLock<Instant>,
    seen: Seen,
    waiting: AtomicUsize,
    /// Of those, the ones that may run in a group of more than one.
    joinable: AtomicUsize,
}

impl Default for CrashAttribution {
    /// On, with a window of 60 s.
    fn default() -> Self {
        Self::new()
    }
}

impl CrashAttribution {
    /// How long after its start a scope judges redeliveries as suspects, unless
    /// [`CrashAttribution::window`] says otherwise. A crash loop shows as restarts: the
    /// redeliveries a restarted consumer receives come at once, and a poison among them is
    /// judged while the process is young. Past it, a redelivery is more often a retry from
    /// another replica than the aftermath of a crash (an outage sends every retry to whichever
    /// replica takes it), and judging it would drain the process for each.
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

    /// A new scope, on, with [`CrashAttribution::DEFAULT_WINDOW`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            id: new_id(),
            scope: Some(Arc::new(Scope {
                lock: Arc::default(),
                group: Mutex::default(),
                opened: tokio::sync::Notify::new(),
                window: Self::DEFAULT_WINDOW,
                started: OnceLock::new(),
                seen: Seen::default(),
                waiting: AtomicUsize::new(0),
                joinable: AtomicUsize::new(0),
            })),
        }
    }

    /// No attribution: nothing waits or runs alone, and a crash charges every delivery and
    /// claimed row in flight. For handlers that cannot crash their process (no native code, no
    /// `abort`, memory well bounded), or where the turn alone of each redelivery after a
    /// restart costs more than an occasional attempt.
    #[must_use]
    pub fn off() -> Self {
        Self {
            id: new_id(),
            scope: None,
        }
    }

    /// A new scope whose processor deliveries are judged for `window` after its start (a
    /// zero window judges none; rows marked by the store are judged whatever the window).
    #[must_use]
    pub fn window(window: Duration) -> Self {
        let mut new = Self::new();
        if let Some(scope) = new.scope.as_mut().and_then(Arc::get_mut) {
            scope.window = window;
        }
        new
    }

    /// This scope's name, `<pid>-<nonce>`: the part before the `/` of the `claimed_by` of the
    /// rows its workers and relays claim.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether attribution is on.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.scope.is_some()
    }

    /// Suspects now waiting for their turn alone (also the gauge
    /// [`metrics::SUSPECTS_WAITING`](crate::metrics::SUSPECTS_WAITING)).
    #[must_use]
    pub fn suspects_waiting(&self) -> usize {
        self.scope
            .as_ref()
            .map_or(0, |s| s.waiting.load(Ordering::Relaxed))
    }

    /// Marks the scope's start, from which the window runs: the first call wins. Called as a
    /// processor, worker or relay is made, so that the window runs from when it began, not from
    /// its first redelivery.
    pub(crate) fn start(&self) {
        if let Some(scope) = &self.scope {
            scope.started.get_or_init(Instant::now);
        }
    }

    /// The turn of ordinary work: beside the rest of the scope, never beside a suspect.
    pub(crate) async fn shared(&self) -> Turn {
        match &self.scope {
            Some(scope) => Turn::Shared(Arc::clone(&scope.lock).read_owned().await),
            None => Turn::Untracked,
        }
    }

    /// Counts a delivery of `key` as running in the scope until the guard is dropped.
    pub(crate) fn running(&self, key: &KeyParams<'_>) -> Option<Running> {
        self.scope.as_ref().map(|scope| {
            let key = joined(key);
            *scope.seen.lock().running.entry(key.clone()).or_default() += 1;
            Running {
                scope: Arc::clone(scope),
                key,
            }
        })
    }

    /// Remembers that `key`'s attempt `attempt` failed where the scope could see it.
    pub(crate) fn failed(&self, key: &KeyParams<'_>, attempt: u32) {
        if let Some(scope) = &self.scope {
            scope.seen.failed(joined(key), attempt);
        }
    }

    /// Whether attempt `attempt` of `key` (itself counted [`CrashAttribution::running`]) may
    /// follow a crash: tried before, within the window, no other copy running in the scope,
    /// and no failure of its last attempt seen here.
    pub(crate) fn is_suspect(&self, key: &KeyParams<'_>, attempt: u32) -> bool {
        let Some(scope) = &self.scope else {
            return false;
        };
        let young = scope
            .started
            .get()
            .is_none_or(|t| t.elapsed() < scope.window);
        attempt > 1 && young && scope.seen.suspect(&joined(key), attempt)
    }

    /// The most suspects a group may hold: a suspect forgiven `forgiven` times (each group it
    /// ran in that a crash took adds one) runs with at most `MAX_GROUP >> forgiven`, so that a
    /// delivery that kills its process is halved down to a group of one, where it is charged.
    pub(crate) fn group_limit(forgiven: u32) -> usize {
        Self::MAX_GROUP.checked_shr(forgiven).unwrap_or(0).max(1)
    }

    /// The largest group of suspects (see [`CrashAttribution::group_limit`]): the consumer's
    /// default concurrency, so that the deliveries a restart hands back run as fast as they
    /// came, while three crashes corner a poison among them.
    pub(crate) const MAX_GROUP: usize = 8;

    /// Counts a suspect of at most `limit` in a group as waiting, from now until its turn
    /// (or until it is dropped, as a wait cut short at shutdown is): taken before its
    /// forgiveness is written, so that a group opening meanwhile counts it among those who may
    /// join.
    pub(crate) fn waiting(&self, work: &'static str, limit: usize) -> Waiting {
        let scope = self.scope.clone();
        if let Some(scope) = &scope {
            scope.waiting.fetch_add(1, Ordering::Relaxed);
            if limit > 1 {
                scope.joinable.fetch_add(1, Ordering::Relaxed);
            }
            metrics::gauge!(m::SUSPECTS_WAITING, "work" => work).increment(1.0);
        }
        Waiting {
            scope,
            work,
            limit: limit.max(1),
        }
    }

    /// A suspect's turn: waits, at most `wait`, until nothing but suspects runs in the scope,
    /// and runs in their group, of at most its limit (1: alone). Past `wait` it runs beside the
    /// rest. Its `work` labels the metrics: `delivery`, `inbox_rows` or `outbox_rows`.
    pub(crate) async fn alone(&self, waiting: Waiting, wait: Duration) -> Turn {
        let Some(scope) = &self.scope else {
            return Turn::Untracked;
        };
        let (work, limit) = (waiting.work, waiting.limit);
        let turn = tokio::time::timeout(wait, scope.group_turn(limit, &waiting)).await;
        drop(waiting);
        match turn {
            Ok(together) => Turn::Group {
                scope: Arc::clone(scope),
                since: Instant::now(),
                work,
                together,
            },
            Err(_) => {
                tracing::warn!(
                    work,
                    ?wait,
                    "work that may have caused the last crash waited its limit for the rest of its scope to end; running it beside the rest"
                );
                Turn::Shared(Arc::clone(&scope.lock).read_owned().await)
            }
        }
    }
}

/// A suspect counted as waiting for its turn until dropped
/// ([`CrashAttribution::waiting`]).
#[derive(Debug)]
pub(crate) struct Waiting {
    scope: Option<Arc<Scope>>,
    work: &'static str,
    limit: usize,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(scope) = &self.scope {
            scope.waiting.fetch_sub(1, Ordering::Relaxed);
            if self.limit > 1 {
                scope.joinable.fetch_sub(1, Ordering::Relaxed);
            }
            metrics::gauge!(m::SUSPECTS_WAITING, "work" => self.work).decrement(1.0);
        }
    }
}

/// The suspects running together, none but them in their scope.
#[derive(Debug)]
struct Group {
    /// The scope's lock, held for the group.
    _alone: OwnedRwLockWriteGuard<()>,
    running: usize,
    /// The most the group may hold: the smallest limit of those who joined it.
    room: usize,
    /// Whether it still takes members: until the first leaves, so that a stream of suspects
    /// cannot keep it open while the rest of the scope, a cornered poison among it, waits.
    admitting: bool,
}

impl Scope {
    /// Joins the group running now when it has room for one more within `limit`, or opens a
    /// group once nothing else of the scope runs: `true` when others may run in it. A suspect
    /// that finds no other suspect waiting runs alone, as a lone redelivery does (one after a
    /// crash of a consumer that ran one delivery at a time): its crash is its own.
    async fn group_turn(&self, limit: usize, waiting: &Waiting) -> bool {
        // Asked once, so that a suspect keeps its place in the lock's queue while it looks at
        // the groups that open.
        let alone = Arc::clone(&self.lock).write_owned();
        tokio::pin!(alone);
        loop {
            let opened = self.opened.notified();
            tokio::pin!(opened);
            opened.as_mut().enable();
            if self.join(limit) {
                return true;
            }
            tokio::select! {
                alone = &mut alone => {
                    // Others that may join: the joinable waiters but this one.
                    let own = usize::from(waiting.limit > 1);
                    let others = self.joinable.load(Ordering::Relaxed) > own;
                    let room = if others { limit } else { 1 };
                    let mut group = self.group_lock();
                    *group = Some(Group { _alone: alone, running: 1, room, admitting: true });
                    drop(group);
                    self.opened.notify_waiters();
                    return room > 1;
                }
                () = &mut opened => {}
            }
        }
    }

    fn join(&self, limit: usize) -> bool {
        let mut group = self.group_lock();
        match group.as_mut() {
            Some(open) if open.admitting && open.running < open.room.min(limit) => {
                open.running += 1;
                open.room = open.room.min(limit);
                true
            }
            _ => false,
        }
    }

    /// One member left; the last one closes the group, and the scope runs as before.
    fn leave(&self) {
        let mut group = self.group_lock();
        if let Some(open) = group.as_mut() {
            open.running -= 1;
            open.admitting = false;
            if open.running == 0 {
                *group = None;
            }
        }
    }

    fn group_lock(&self) -> std::sync::MutexGuard<'_, Option<Group>> {
        self.group
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Work's place in its scope while it runs; let go when dropped.
#[derive(Debug)]
pub(crate) enum Turn {
    /// Beside the rest of the scope.
    Shared(#[allow(dead_code, reason = "held, not read")] OwnedRwLockReadGuard<()>),
    /// In a group of suspects, none but them in the scope (alone, in a group of one).
    Group {
        scope: Arc<Scope>,
        since: Instant,
        work: &'static str,
        /// Others may run in the group (else it runs alone: a crash now is its own).
        together: bool,
    },
    /// Attribution is off.
    Untracked,
}

impl Turn {
    /// Beside the rest of its scope (not alone, and attribution on).
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Self::Shared(_))
    }

    /// In a group of suspects (of one, or more).
    #[cfg(test)]
    pub(crate) fn is_group(&self) -> bool {
        matches!(self, Self::Group { .. })
    }

    /// In a group that others may run in: a crash now may be another's.
    pub(crate) fn is_together(&self) -> bool {
        matches!(self, Self::Group { together: true, .. })
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Self::Group {
            scope, since, work, ..
        } = self
        {
            scope.leave();
            metrics::histogram!(m::ALONE_SECONDS, "work" => *work)
                .record(since.elapsed().as_secs_f64());
        }
    }
}

/// A delivery of a key counted as running in its scope until dropped.
#[derive(Debug)]
pub(crate) struct Running {
    scope: Arc<Scope>,
    key: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut recent = self.scope.seen.lock();
        if let Some(n) = recent.running.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                recent.running.remove(&self.key);
            }
        }
    }
}

/// What a scope saw of its keys (consumer and message id): the deliveries of each running,
/// and the keys whose last attempt failed where it could be seen (an error, a rollback, a lock
/// wait given up), with that attempt's number. Bounded: past [`Seen::KEPT`] failed keys the
/// oldest is forgotten, and its redelivery taken for a suspect, which costs it a turn alone,
/// never an attempt.
#[derive(Debug, Default)]
struct Seen(Mutex<Recent>);

#[derive(Debug, Default)]
struct Recent {
    running: HashMap<String, u32>,
    failed: HashMap<String, u32>,
    order: VecDeque<String>,
}

impl Seen {
    const KEPT: usize = 10_000;

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn failed(&self, key: String, attempt: u32) {
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

    /// No other delivery of the key runs here, and no attempt of it was seen to fail here, or
    /// one was and more were made since.
    fn suspect(&self, key: &str, attempt: u32) -> bool {
        let recent = self.lock();
        recent.running.get(key).is_none_or(|&n| n <= 1)
            && recent
                .failed
                .get(key)
                .is_none_or(|&seen| seen + 1 != attempt)
    }
}

/// A scope's name: this process's id and a random nonce.
fn new_id() -> Arc<str> {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    format!("{}-{}", std::process::id(), &nonce[..8]).into()
}

/// A key as one string: the consumer, a NUL (which a consumer name cannot hold), the id.
fn joined(key: &KeyParams<'_>) -> String {
    format!("{}\0{}", key.consumer.as_str(), key.message_id.as_str())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{CrashAttribution, Seen, Turn};
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
        let scope = CrashAttribution::new();
        let (c, other) = (
            ConsumerName::new("c").unwrap(),
            ConsumerName::new("d").unwrap(),
        );
        let a = MessageId::new("a").unwrap();
        assert!(!scope.is_suspect(&key(&c, &a), 1), "a first attempt");
        assert!(
            scope.is_suspect(&key(&c, &a), 2),
            "nothing seen: a crash may have come first"
        );
        scope.failed(&key(&c, &a), 1);
        assert!(
            !scope.is_suspect(&key(&c, &a), 2),
            "the attempt after the one seen to fail"
        );
        assert!(
            scope.is_suspect(&key(&c, &a), 3),
            "another attempt came between"
        );
        assert!(
            scope.is_suspect(&key(&other, &a), 2),
            "another consumer's key"
        );
        for i in 0..Seen::KEPT {
            scope.failed(&key(&c, &MessageId::new(format!("k{i}")).unwrap()), 1);
        }
        assert!(
            scope.is_suspect(&key(&c, &a), 2),
            "forgotten past the bound"
        );
        let elsewhere = CrashAttribution::new();
        elsewhere.failed(&key(&c, &a), 1);
        assert!(
            scope.is_suspect(&key(&c, &a), 2) && !elsewhere.is_suspect(&key(&c, &a), 2),
            "each scope sees its own"
        );
    }

    #[test]
    fn a_copy_beside_one_running_here_is_not_a_suspect() {
        let scope = CrashAttribution::new();
        let (c, b) = (
            ConsumerName::new("c").unwrap(),
            MessageId::new("b").unwrap(),
        );
        let first = scope.running(&key(&c, &b));
        let second = scope.running(&key(&c, &b));
        assert!(
            !scope.is_suspect(&key(&c, &b), 2),
            "its earlier attempt is running here"
        );
        drop(first);
        assert!(scope.is_suspect(&key(&c, &b), 2), "alone again");
        drop(second);
    }

    #[test]
    fn past_the_window_or_off_nothing_is_a_suspect() {
        let (c, b) = (
            ConsumerName::new("c").unwrap(),
            MessageId::new("b").unwrap(),
        );
        let none = CrashAttribution::window(Duration::ZERO);
        none.start();
        assert!(!none.is_suspect(&key(&c, &b), 2));
        let off = CrashAttribution::off();
        off.start();
        assert!(!off.is_suspect(&key(&c, &b), 2));
        assert!(off.running(&key(&c, &b)).is_none());
    }

    #[tokio::test]
    async fn a_suspect_waits_for_its_scope_only() {
        let (scope, other) = (CrashAttribution::new(), CrashAttribution::new());
        let running = scope.shared().await;
        let wait = Duration::from_millis(50);
        assert!(
            other
                .alone(other.waiting("delivery", 1), wait)
                .await
                .is_group(),
            "another scope's work is not waited for"
        );
        assert!(
            scope
                .alone(scope.waiting("delivery", 1), wait)
                .await
                .is_shared(),
            "its own is, up to the limit"
        );
        let waiter = tokio::spawn({
            let scope = scope.clone();
            async move {
                scope
                    .alone(scope.waiting("delivery", 1), Duration::from_secs(5))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(scope.suspects_waiting(), 1, "a clone is the same scope");
        drop(running);
        assert!(waiter.await.unwrap().is_group());
        assert_eq!(scope.suspects_waiting(), 0);
        let off = CrashAttribution::off();
        assert!(matches!(
            off.alone(off.waiting("delivery", 1), wait).await,
            Turn::Untracked
        ));
        assert!(matches!(off.shared().await, Turn::Untracked));
    }

    #[tokio::test]
    async fn suspects_run_in_groups_no_larger_than_the_smallest_limit_among_them() {
        let scope = CrashAttribution::new();
        let long = Duration::from_secs(5);
        let suspect = |limit: usize| {
            let scope = scope.clone();
            tokio::spawn(async move { scope.alone(scope.waiting("delivery", limit), long).await })
        };
        let running = scope.shared().await;
        let (first, second) = (suspect(4), suspect(2));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(scope.suspects_waiting(), 2);
        drop(running);
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        assert!(
            first.is_together() && second.is_together(),
            "two waiting suspects run together"
        );
        let (third, ordinary) = (
            suspect(4),
            tokio::spawn({
                let scope = scope.clone();
                async move { scope.shared().await }
            }),
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !third.is_finished(),
            "a third is one too many for the second's limit"
        );
        assert!(
            !ordinary.is_finished(),
            "nothing but suspects runs beside a group"
        );
        drop((first, second));
        let third = third.await.unwrap();
        assert!(
            third.is_group() && !third.is_together(),
            "a suspect that finds no other waiting runs alone"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!ordinary.is_finished());
        drop(third);
        assert!(ordinary.await.unwrap().is_shared());
        assert_eq!(CrashAttribution::group_limit(0), 8);
        assert_eq!(CrashAttribution::group_limit(2), 2);
        assert_eq!(CrashAttribution::group_limit(3), 1);
        assert_eq!(CrashAttribution::group_limit(40), 1);
    }

    #[tokio::test]
    async fn a_wait_cut_short_is_no_longer_counted_and_a_group_admits_until_one_leaves() {
        let scope = CrashAttribution::new();
        let running = scope.shared().await;
        let cut = tokio::spawn({
            let scope = scope.clone();
            async move {
                let waiting = scope.waiting("delivery", 8);
                scope.alone(waiting, Duration::from_secs(5)).await
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(scope.suspects_waiting(), 1);
        cut.abort();
        let _ = cut.await;
        assert_eq!(scope.suspects_waiting(), 0, "the wait was dropped");
        drop(running);
        let wait = Duration::from_millis(30);
        let (first, second) = (scope.waiting("delivery", 8), scope.waiting("delivery", 8));
        let first = scope.alone(first, wait).await;
        let second = scope.alone(second, wait).await;
        assert!(first.is_together() && second.is_together());
        drop(first);
        let late = tokio::spawn({
            let scope = scope.clone();
            async move {
                scope
                    .alone(scope.waiting("delivery", 8), Duration::from_secs(5))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !late.is_finished(),
            "one has left: the group takes no one more"
        );
        drop(second);
        assert!(late.await.unwrap().is_group());
    }
}
