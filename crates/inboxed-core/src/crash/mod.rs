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

use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use group::Group;

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

    /// The turn of a batch of rows: beside the rest (`shared`), unless the store's crash
    /// halving `marked` some of them, which then run alone, waiting at most `wait`.
    pub(crate) async fn rows_turn(
        &self,
        shared: Turn,
        marked: bool,
        work: &'static str,
        wait: Duration,
    ) -> Turn {
        if !marked {
            return shared;
        }
        drop(shared);
        self.alone(self.waiting(work, 1), wait).await
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

mod group;
#[cfg(test)]
mod tests;
