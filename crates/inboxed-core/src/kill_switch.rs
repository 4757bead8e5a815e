//! The kill switch: when most of a consumer's recent deliveries fail transiently, what failed is
//! most likely what they all depend on (a downstream service, the database), not each message.
//! Charging each of them an attempt would dead-letter, in a few minutes of outage, messages that
//! would have been processed a minute later. So the switch opens: the consumer takes no new
//! deliveries, the failures that opened it and every transient failure while it is open are
//! forgiven (they use up no attempt), and after a pause one delivery goes through as a probe. A
//! probe that succeeds closes the switch; one that fails opens it again for twice the pause.
//!
//! The switch counts distinct messages, so one message failing again and again, alone or among
//! deliveries that succeed, never opens it: its own failures use up its attempts as before. A
//! permanent failure is the handler's verdict on the message, an answer from the world like a
//! success. A stream whose messages all fail on their own (a bad deploy) looks like an outage,
//! and is held, not dead-lettered: `inboxed_kill_switch_open` says so.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::envelope::{ConsumerName, MessageId};
use crate::metrics as m;

/// How long the others wait for a probe before another one goes (the processor's default
/// `handler_timeout`): a probe cut short, or one that ended neither way (it waited for another
/// delivery's claim), never comes back.
const PROBE_WAIT: Duration = Duration::from_secs(30);

/// A consumer's kill switch ([module docs](self)). Clones share one switch; each default
/// [`ProcessorConfig`](crate::ProcessorConfig) makes its own, so one consumer's outage does not
/// pause another; give one value to several configs to pause them together.
#[derive(Debug, Clone)]
pub struct KillSwitch {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: Settings,
    state: Mutex<State>,
    /// Wakes whoever waits in [`KillSwitch::admit`] when the switch closes, or when a probe
    /// comes back.
    changed: Notify,
    /// The `consumer` label of its metrics: the first consumer whose processor took it.
    label: Mutex<String>,
    /// Names this switch's row among the open switches (`report.rs`): random, so that each
    /// process's switch has a row of its own.
    id: String,
    /// Since when it is open and when it probes next, for whoever reports it (`report.rs`).
    opened: watch::Sender<Option<Opened>>,
}

/// An open switch, as it is reported to the store: wall-clock times, since the operator who
/// reads them (`inboxed stats`, the console) is in another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// When it opened: how long the consumer has been paused.
    pub at: SystemTime,
    /// When its next probe goes: when it may resume, at the earliest.
    pub next_probe: SystemTime,
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    on: bool,
    window: usize,
    failures: usize,
    pause: Duration,
    max_pause: Duration,
}

/// A transient failure's key, so that opening can forgive it.
type Failed = (ConsumerName, MessageId);

/// A delivery that ran, in the window: `None` succeeded; a failure with its key and whether its
/// attempt was charged (a failure before the count, or one the handler asked to retry later,
/// charged nothing, and opening must not forgive it).
type Ran = Option<(Failed, bool)>;

#[derive(Debug)]
enum State {
    /// Deliveries go through. `recent` holds the last `window` deliveries that ran.
    Closed { recent: VecDeque<Ran> },
    /// No delivery goes through until `until`; then one probes.
    Open { until: Instant, pause: Duration },
    /// One delivery is probing. If it does not come back by `deadline` (it was cut short, or
    /// ended in neither way: a wait for another delivery's claim), another one probes.
    Probing { pause: Duration, deadline: Instant },
}

/// What a transient failure is charged, by the switch's state.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Judged {
    /// The switch is closed: the failure uses up its attempt, as any other. `doubt`: at least
    /// half the failures that would open it are in the window, so an outage may be starting;
    /// a message on its last attempt is then requeued rather than dead-lettered, and its next
    /// delivery decides (past `max_attempts` unless the switch opens and forgives it).
    Charged {
        /// An outage may be starting.
        doubt: bool,
    },
    /// The switch is open, or this failure opened it: forgive these keys one attempt each
    /// (this failure's, and those of the failures that opened it).
    Forgiven(Vec<Failed>),
}

impl Default for KillSwitch {
    fn default() -> Self {
        Self::new()
    }
}

impl KillSwitch {
    /// A switch that opens when deliveries of 10 distinct messages failed transiently among the
    /// last 20 deliveries that ran, pauses 5 s
    /// before its first probe, and doubles the pause after each failed probe up to 1 min.
    #[must_use]
    pub fn new() -> Self {
        Self::with(Settings {
            on: true,
            window: 20,
            failures: 10,
            pause: Duration::from_secs(5),
            max_pause: Duration::from_secs(60),
        })
    }

    /// A switch that never opens: every transient failure uses up its attempt, whatever the
    /// others do (as before there was a switch).
    #[must_use]
    pub fn off() -> Self {
        Self::with(Settings {
            on: false,
            ..Self::new().inner.settings
        })
    }

    /// Opens when deliveries of `failures` distinct messages failed transiently among the last
    /// `window` deliveries that ran (`failures` at least 1, `window` at least `failures`).
    /// Defaults to 10 of 20.
    #[must_use]
    pub fn trip_at(self, failures: usize, window: usize) -> Self {
        let failures = failures.max(1);
        Self::with(Settings {
            failures,
            window: window.max(failures),
            ..self.inner.settings
        })
    }

    /// The pause before the first probe, and the longest it grows to after failed probes.
    /// Defaults to 5 s and 1 min.
    #[must_use]
    pub fn pause(self, first: Duration, max: Duration) -> Self {
        Self::with(Settings {
            pause: first,
            max_pause: max.max(first),
            ..self.inner.settings
        })
    }

    fn with(settings: Settings) -> Self {
        Self {
            inner: Arc::new(Inner {
                settings,
                state: Mutex::new(State::Closed {
                    recent: VecDeque::with_capacity(settings.window),
                }),
                changed: Notify::new(),
                label: Mutex::new(String::new()),
                id: uuid::Uuid::new_v4().simple().to_string()[..12].to_owned(),
                opened: watch::Sender::new(None),
            }),
        }
    }

    /// Whether deliveries are held back now (open, or a probe out).
    #[must_use]
    pub fn is_open(&self) -> bool {
        !matches!(*self.state(), State::Closed { .. })
    }

    /// Whether the switch can open at all (not [`KillSwitch::off`]).
    pub(crate) fn is_on(&self) -> bool {
        self.inner.settings.on
    }

    /// This switch's id among the open switches.
    pub(crate) fn id(&self) -> &str {
        &self.inner.id
    }

    /// Since when it is open (and when it probes next), as it changes.
    pub(crate) fn watch_opened(&self) -> watch::Receiver<Option<Opened>> {
        self.inner.opened.subscribe()
    }

    /// Names the switch's metrics after `consumer`, unless a processor named them already.
    pub(crate) fn start(&self, consumer: &ConsumerName) {
        let mut label = self
            .inner
            .label
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if label.is_empty() {
            consumer.as_str().clone_into(&mut label);
        }
        drop(label);
        self.gauge(false);
    }

    /// Waits until a delivery may go through: at once while closed; while open, until the pause
    /// is over, when the first caller goes through as the probe (`true`) and the others wait for
    /// what it finds. Whoever runs the probe calls [`KillSwitch::probe_ended`] when it is
    /// settled, whatever it came to.
    pub async fn admit(&self) -> bool {
        if !self.inner.settings.on {
            return false;
        }
        loop {
            let notified = self.inner.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let wake = {
                let mut state = self.state();
                let now = Instant::now();
                match *state {
                    State::Closed { .. } => return false,
                    State::Open { until, pause }
                    | State::Probing {
                        deadline: until,
                        pause,
                    } if now >= until => {
                        *state = State::Probing {
                            pause,
                            deadline: now + pause.max(PROBE_WAIT),
                        };
                        return true;
                    }
                    State::Open { until, .. }
                    | State::Probing {
                        deadline: until, ..
                    } => until,
                }
            };
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// A probe is settled. One that neither succeeded nor failed (a duplicate, a key another
    /// delivery held) told nothing: the next delivery probes at once.
    pub fn probe_ended(&self) {
        let mut state = self.state();
        if let State::Probing { pause, .. } = *state {
            *state = State::Open {
                until: Instant::now(),
                pause,
            };
            drop(state);
            self.inner.changed.notify_waiters();
        }
    }

    /// A delivery succeeded (or the handler judged it permanently bad: the world answered). A
    /// success closes the switch only when it is probing, or when its pause is over and no one
    /// probes (a loop of the caller's own, or `Tenants`, which do not wait in
    /// [`KillSwitch::admit`]): deliveries let through before it opened may still succeed during
    /// an outage that is partial.
    pub(crate) fn succeeded(&self) {
        if !self.inner.settings.on {
            return;
        }
        let mut state = self.state();
        let now = Instant::now();
        match &mut *state {
            State::Closed { recent } => self.push(recent, None),
            State::Open { until, .. } if now < *until => {}
            State::Open { .. } | State::Probing { .. } => {
                *state = State::Closed {
                    recent: VecDeque::with_capacity(self.inner.settings.window),
                };
                self.inner.opened.send_replace(None);
                drop(state);
                info!(consumer = %self.label(), "a probe succeeded; the kill switch closes and deliveries go on");
                self.gauge(false);
                self.inner.changed.notify_waiters();
            }
        }
    }

    /// A delivery of `key` (of `consumer`) failed transiently, or the store failed under it;
    /// `charged`: its attempt was counted (so that opening may forgive it).
    pub(crate) fn failed(&self, consumer: &ConsumerName, key: &MessageId, charged: bool) -> Judged {
        let settings = self.inner.settings;
        if !settings.on {
            return Judged::Charged { doubt: false };
        }
        let this = || {
            if charged {
                vec![(consumer.clone(), key.clone())]
            } else {
                Vec::new()
            }
        };
        let mut state = self.state();
        let now = Instant::now();
        match &mut *state {
            State::Closed { recent } => {
                self.push(recent, Some(((consumer.clone(), key.clone()), charged)));
                // Distinct messages: one message failing again and again is its own fault
                // (its attempts run out), not an outage.
                let mut distinct: Vec<&Failed> = recent.iter().flatten().map(|(f, _)| f).collect();
                distinct.sort_unstable();
                distinct.dedup();
                if distinct.len() < settings.failures {
                    return Judged::Charged {
                        doubt: distinct.len() * 2 >= settings.failures,
                    };
                }
                let opened: Vec<Failed> = recent
                    .drain(..)
                    .flatten()
                    .filter_map(|(f, charged)| charged.then_some(f))
                    .collect();
                *state = State::Open {
                    until: now + settings.pause,
                    pause: settings.pause,
                };
                // Under the state's lock, so that a close right after cannot be overtaken.
                let at = SystemTime::now();
                self.inner.opened.send_replace(Some(Opened {
                    at,
                    next_probe: at + settings.pause,
                }));
                drop(state);
                warn!(
                    consumer = %self.label(),
                    messages = distinct_count(&opened),
                    pause = ?settings.pause,
                    "deliveries of many distinct messages failed transiently: the kill switch opens; no delivery is taken until a probe succeeds, and no attempt is charged meanwhile"
                );
                metrics::counter!(m::KILL_SWITCH_TRIPS_TOTAL, "consumer" => self.label())
                    .increment(1);
                self.gauge(true);
                Judged::Forgiven(opened)
            }
            State::Open { until, .. } if now < *until => Judged::Forgiven(this()),
            // A probe failed: the one let through, or, where no one waits in `admit`, the
            // first delivery after the pause.
            State::Open { pause, .. } | State::Probing { pause, .. } => {
                let pause = pause.saturating_mul(2).min(settings.max_pause);
                *state = State::Open {
                    until: now + pause,
                    pause,
                };
                self.inner.opened.send_modify(|opened| {
                    let next_probe = SystemTime::now() + pause;
                    let at = opened.map_or_else(SystemTime::now, |o| o.at);
                    *opened = Some(Opened { at, next_probe });
                });
                drop(state);
                info!(consumer = %self.label(), pause = ?pause, "a probe failed; the kill switch stays open");
                self.inner.changed.notify_waiters();
                Judged::Forgiven(this())
            }
        }
    }

    /// `n` deliveries (or rows) succeeded.
    pub(crate) fn succeeded_times(&self, n: u64) {
        if !self.inner.settings.on {
            return;
        }
        let window = u64::try_from(self.inner.settings.window).unwrap_or(u64::MAX);
        for _ in 0..n.min(window) {
            self.succeeded();
        }
    }

    fn push(&self, recent: &mut VecDeque<Ran>, outcome: Ran) {
        if recent.len() >= self.inner.settings.window {
            recent.pop_front();
        }
        recent.push_back(outcome);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn label(&self) -> String {
        self.inner
            .label
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn gauge(&self, open: bool) {
        metrics::gauge!(m::KILL_SWITCH_OPEN, "consumer" => self.label())
            .set(f64::from(u8::from(open)));
    }
}

/// How many distinct messages `failed` names.
fn distinct_count(failed: &[Failed]) -> usize {
    let mut keys: Vec<&Failed> = failed.iter().collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

mod report;
#[cfg(test)]
mod tests;

pub(crate) use report::reporting;
