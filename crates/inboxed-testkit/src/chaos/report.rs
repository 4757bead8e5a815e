//! What a storm reports: its figures, the messages lost or doubled, and why it failed.

use std::fmt;
use std::time::{Duration, Instant};

/// What a storm did, and what the audit found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ChaosReport {
    /// The seed the run used.
    pub seed: u64,
    /// Distinct messages published.
    pub published: usize,
    /// Messages published a second time (producer retries).
    pub republished: usize,
    /// Publishes that failed and were tried again (the broker refused or dropped them).
    pub publish_errors: usize,
    /// Consumer processes killed with SIGKILL.
    pub kills: usize,
    /// Time from the start of the storm to the final audit.
    pub elapsed: Duration,
    /// Published messages the audit found without an effect.
    pub lost: Vec<String>,
    /// Published messages the audit found with more than one effect, and how many.
    pub doubled: Vec<(String, i64)>,
    /// Published messages without an effect and with a dead letter, and its reason (given
    /// [`Chaos::with_dead_letters`](super::Chaos::with_dead_letters); otherwise they are
    /// among `lost`).
    pub dead_lettered: Vec<(String, String)>,
}

impl ChaosReport {
    /// Whether every message took effect exactly once.
    #[must_use]
    pub fn exact(&self) -> bool {
        self.lost.is_empty() && self.doubled.is_empty() && self.dead_lettered.is_empty()
    }
}

/// Lists at most the first few of `items`.
fn some<T: fmt::Debug>(items: &[T]) -> String {
    const SHOWN: usize = 10;
    let more = items.len().saturating_sub(SHOWN);
    let shown: Vec<String> = items.iter().take(SHOWN).map(|i| format!("{i:?}")).collect();
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

impl fmt::Display for ChaosReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} messages published ({} of them twice, {} publishes retried after an error), \
             {} consumers killed, audited after {:.1} s (seed {})",
            self.published,
            self.republished,
            self.publish_errors,
            self.kills,
            self.elapsed.as_secs_f64(),
            self.seed
        )?;
        if !self.lost.is_empty() {
            write!(
                f,
                "\n  lost (no effect): {} messages: {}",
                self.lost.len(),
                some(&self.lost)
            )?;
        }
        if !self.doubled.is_empty() {
            write!(
                f,
                "\n  doubled (more than one effect): {} messages: {}",
                self.doubled.len(),
                some(&self.doubled)
            )?;
        }
        if !self.dead_lettered.is_empty() {
            write!(
                f,
                "\n  dead-lettered (no effect, a dead letter kept): {} messages: {}",
                self.dead_lettered.len(),
                some(&self.dead_lettered)
            )?;
        }
        Ok(())
    }
}

/// Why a storm failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChaosFailure {
    /// The audit found messages doubled, or lost (without an effect when the settle time ran
    /// out, while the others had theirs).
    NotExact(ChaosReport),
    /// The storm could not run to its audit: no consumer was killed, the consumer would not
    /// start or exited on its own, the producer gave up, the audit failed, or no message at
    /// all took effect within [`ChaosConfig::settle`](super::ChaosConfig::settle).
    Broken {
        /// What went wrong.
        what: String,
        /// The storm so far.
        report: ChaosReport,
    },
}

impl fmt::Display for ChaosFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotExact(report) => {
                write!(
                    f,
                    "the consumer did not take every message's effect exactly once under \
                     SIGKILLs: {report}\n  usual cause: an ack before the commit (auto-ack, or \
                     acking on receipt) loses messages; work outside the inbox transaction \
                     doubles them"
                )?;
                if !report.dead_lettered.is_empty() {
                    write!(
                        f,
                        "; a good message dead-lettered for attempts_exhausted used up its \
                         attempts on crashes: the kills outnumber max_attempts, or crashes are \
                         charged to deliveries that did not cause them"
                    )?;
                }
                Ok(())
            }
            Self::Broken { what, report } => {
                write!(f, "the storm could not run: {what}\n  {report}")
            }
        }
    }
}

impl std::error::Error for ChaosFailure {}

/// A [`ChaosFailure::Broken`] with the report's time so far.
pub(super) fn broken(what: String, mut report: ChaosReport, started: Instant) -> ChaosFailure {
    report.elapsed = started.elapsed();
    ChaosFailure::Broken { what, report }
}
