//! The process-level harness: your consumer binary, killed with SIGKILL at random points and
//! restarted, while a producer publishes through your real broker with producer retries; then
//! a ledger audit of your own says whether every message took effect exactly once.
//!
//! Where the [`Kit`](crate::Kit)'s checks attack one handler call at a time inside the test
//! process, this attacks the whole service as it runs in production: its broker client, its
//! acks, its prefetch, its start-up (migrations, connecting) under kills that land wherever
//! they land. A kill between a commit and its ack, inside a handler, in the
//! middle of a COMMIT or a reconnect: whatever the seed picks.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use inboxed_core::BoxError;
use tokio::process::{Child, Command};

/// How long one publish or one audit may take before it counts as failed.
const LIMIT: Duration = Duration::from_secs(30);

/// How the storm runs. Every field says its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChaosConfig {
    /// Messages the producer publishes, spread evenly over the storm. Defaults to 200.
    pub messages: usize,
    /// How long the storm lasts: the producer publishes through it, and the consumer is killed
    /// and restarted through it. Defaults to 10 s.
    pub storm: Duration,
    /// How long each consumer process runs before it is killed: uniform in this range, from
    /// the seed, and then until it has applied an effect since it started (the audit shows
    /// one more), so that every kill interrupts a consumer at work. Defaults to 300 ms to
    /// 1.5 s.
    pub run_between_kills: (Duration, Duration),
    /// The share of messages the producer publishes a second time, at a random later point of
    /// the storm (a producer that retried a publish whose confirm it never saw). Defaults to
    /// 0.25.
    pub producer_retries: f64,
    /// After the storm, how long the last consumer (never killed) has to give every message
    /// its effect. Defaults to 60 s.
    pub settle: Duration,
    /// Once every message shows its effect, how long to keep the consumer running for late
    /// duplicates (redeliveries of messages already done) to show theirs. Defaults to 2 s.
    pub quiet: Duration,
    /// Seeds the kill points and the retried messages; the report prints it, so a failing
    /// run can be replayed. Defaults to one drawn from the clock.
    pub seed: u64,
}

impl Default for ChaosConfig {
    fn default() -> Self {
        Self {
            messages: 200,
            storm: Duration::from_secs(10),
            run_between_kills: (Duration::from_millis(300), Duration::from_millis(1500)),
            producer_retries: 0.25,
            settle: Duration::from_secs(60),
            quiet: Duration::from_secs(2),
            seed: fastrand::u64(..),
        }
    }
}

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
}

impl ChaosReport {
    /// Whether every message took effect exactly once.
    #[must_use]
    pub fn exact(&self) -> bool {
        self.lost.is_empty() && self.doubled.is_empty()
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
    /// all took effect within [`ChaosConfig::settle`].
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
            Self::NotExact(report) => write!(
                f,
                "the consumer did not take every message's effect exactly once under SIGKILLs: \
                 {report}\n  usual cause: an ack before the commit (auto-ack, or acking on \
                 receipt) loses messages; work outside the inbox transaction doubles them"
            ),
            Self::Broken { what, report } => {
                write!(f, "the storm could not run: {what}\n  {report}")
            }
        }
    }
}

impl std::error::Error for ChaosFailure {}

/// The harness: a function that makes the command of your consumer (called for every start),
/// and a [`ChaosConfig`].
pub struct Chaos {
    command: Box<dyn Fn() -> Command + Send + Sync>,
    config: ChaosConfig,
}

impl fmt::Debug for Chaos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chaos")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Chaos {
    /// A storm for the consumer that `command` starts (its program, arguments and
    /// environment: the database and the broker of the test). The harness gives it no stdin
    /// and kills it with SIGKILL; its stdout and stderr are as `command` sets them (inherited
    /// unless set).
    pub fn new(command: impl Fn() -> Command + Send + Sync + 'static) -> Self {
        Self {
            command: Box::new(command),
            config: ChaosConfig::default(),
        }
    }

    /// Replaces the [`ChaosConfig`].
    #[must_use]
    pub fn with_config(mut self, config: ChaosConfig) -> Self {
        self.config = config;
        self
    }

    /// Runs the storm. `publish(id, n)` publishes message number `n` under the message id
    /// `id` on your broker (the id is what your consumer's inbox deduplicates on; the same
    /// `(id, n)` comes again for a producer retry); a failed publish is tried again. `audit()`
    /// reads your ledger: each message id with the number of effects it has (`SELECT
    /// message_id, count(*) FROM ledger GROUP BY message_id`); ids the storm did not publish
    /// are ignored, so the ledger may hold other rows.
    ///
    /// The consumer runs from the start; during the storm it is killed at random points and
    /// started again at once. After the storm the last one runs until every message shows an
    /// effect, then [`ChaosConfig::quiet`] longer; it is killed, and the ledger audited.
    ///
    /// # Errors
    /// [`ChaosFailure::NotExact`] when a message has more than one effect, or none while the
    /// others took theirs within [`ChaosConfig::settle`]; [`ChaosFailure::Broken`] when the
    /// storm could not run to its audit (no kill happened, the consumer would not start or
    /// exited on its own, a publish failed 50 times, the audit failed, or no message at all
    /// took effect).
    pub async fn run<P, PF, PE, A, AF, AE>(
        &self,
        publish: P,
        audit: A,
    ) -> Result<ChaosReport, ChaosFailure>
    where
        P: Fn(String, u64) -> PF,
        PF: Future<Output = Result<(), PE>>,
        PE: Into<BoxError>,
        A: Fn() -> AF,
        AF: Future<Output = Result<Vec<(String, i64)>, AE>>,
        AE: Into<BoxError>,
    {
        let config = &self.config;
        let started = Instant::now();
        let mut rng = fastrand::Rng::with_seed(config.seed);
        // The seed fixes the kill points and the retries; the run's own mark keeps a replay
        // on the same database from meeting the ids of the run it replays.
        let run = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let ids: Vec<String> = (0..config.messages)
            .map(|n| format!("chaos-{:x}-{run}-{n}", config.seed))
            .collect();
        let mut report = ChaosReport {
            seed: config.seed,
            published: ids.len(),
            ..ChaosReport::default()
        };
        let plan = publish_plan(config, &mut rng, &mut report);
        let errors = AtomicUsize::new(0);
        let kills = AtomicUsize::new(0);
        let stormed = {
            let producer = produce(plan, &ids, &publish, &errors, started);
            let storm = self.storm(started, &mut rng, &kills, &audit);
            tokio::pin!(producer, storm);
            let mut produced = false;
            loop {
                tokio::select! {
                    stormed = &mut storm => {
                        // The storm is over: the producer's last publishes go out while the
                        // last consumer runs.
                        break match (stormed, produced) {
                            (Err(what), _) => Err(what),
                            (Ok(child), true) => Ok(child),
                            (Ok(mut child), false) => match producer.await {
                                Ok(()) => Ok(child),
                                Err(what) => {
                                    kill(&mut child).await;
                                    Err(what)
                                }
                            },
                        };
                    }
                    published = &mut producer, if !produced => match published {
                        Ok(()) => produced = true,
                        // The storm's consumer goes with the storm (killed on drop).
                        Err(what) => break Err(what),
                    },
                }
            }
        };
        report.publish_errors = errors.load(Ordering::SeqCst);
        report.kills = kills.load(Ordering::SeqCst);
        let mut child = stormed.map_err(|what| broken(what, report.clone(), started))?;
        if report.kills == 0 {
            kill(&mut child).await;
            return Err(broken(
                "the storm killed no consumer: make `storm` longer than `run_between_kills`"
                    .to_owned(),
                report,
                started,
            ));
        }

        // The last consumer, never killed, settles what is left.
        let deadline = Instant::now() + config.settle;
        loop {
            if let Some(status) = exited(&mut child) {
                return Err(broken(
                    format!("the last consumer exited on its own, {status}"),
                    report,
                    started,
                ));
            }
            let counts = read(&audit)
                .await
                .map_err(|what| broken(what, report.clone(), started))?;
            verdict(&ids, &counts, &mut report);
            if report.lost.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                kill(&mut child).await;
                report.elapsed = started.elapsed();
                if report.lost.len() == report.published {
                    return Err(broken(
                        format!(
                            "no message had an effect {:.0} s after the storm: the consumer \
                             does not consume, or the audit does not see its ledger",
                            config.settle.as_secs_f64()
                        ),
                        report,
                        started,
                    ));
                }
                // Others took effect and these did not: lost, as far as a consumer that
                // settled the rest can tell.
                return Err(ChaosFailure::NotExact(report));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(config.quiet).await;
        kill(&mut child).await;
        let counts = read(&audit)
            .await
            .map_err(|what| broken(what, report.clone(), started))?;
        verdict(&ids, &counts, &mut report);
        report.elapsed = started.elapsed();
        if report.exact() {
            Ok(report)
        } else {
            Err(ChaosFailure::NotExact(report))
        }
    }

    /// The kills: a consumer started, killed at a random point once it has applied an effect
    /// since it started (so that each kill interrupts a consumer at work, not one still
    /// connecting, which on a loaded machine can take longer than the random point), started
    /// again, until the storm's end; the consumer then running. Counts the kills in `kills`.
    async fn storm<A, AF, AE>(
        &self,
        started: Instant,
        rng: &mut fastrand::Rng,
        kills: &AtomicUsize,
        audit: &A,
    ) -> Result<Child, String>
    where
        A: Fn() -> AF,
        AF: Future<Output = Result<Vec<(String, i64)>, AE>>,
        AE: Into<BoxError>,
    {
        let config = &self.config;
        let storm_end = started + config.storm;
        let mut effects = total(&read(audit).await?);
        let mut child = self.start()?;
        loop {
            let (low, high) = config.run_between_kills;
            let at = Instant::now() + low + high.saturating_sub(low).mul_f64(rng.f64());
            if at >= storm_end {
                return Ok(child);
            }
            tokio::time::sleep_until(at.into()).await;
            loop {
                if let Some(status) = exited(&mut child) {
                    return Err(format!(
                        "the consumer exited on its own, {status}, before it was killed"
                    ));
                }
                let now = total(&read(audit).await?);
                if now > effects {
                    effects = now;
                    break;
                }
                if Instant::now() >= storm_end {
                    return Ok(child);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            kill(&mut child).await;
            kills.fetch_add(1, Ordering::SeqCst);
            child = self.start()?;
        }
    }

    /// Starts a consumer, in a process group of its own (Unix) so that a kill reaches the
    /// consumer even when the command is a wrapper (a shell, a script) that started it.
    fn start(&self) -> Result<Child, String> {
        let mut command = (self.command)();
        command
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        command
            .spawn()
            .map_err(|e| format!("the consumer would not start: {e}"))
    }
}

/// When each publish happens, as an offset into the storm, with the message's number: every
/// message once, evenly spread, and a share of them again at a random later point.
fn publish_plan(
    config: &ChaosConfig,
    rng: &mut fastrand::Rng,
    report: &mut ChaosReport,
) -> Vec<(Duration, usize)> {
    let step = config
        .storm
        .checked_div(u32::try_from(config.messages.max(1)).unwrap_or(u32::MAX))
        .unwrap_or_default();
    let mut plan = Vec::new();
    for n in 0..config.messages {
        let at = step * u32::try_from(n).unwrap_or(u32::MAX);
        plan.push((at, n));
        if rng.f64() < config.producer_retries {
            let later = at + config.storm.saturating_sub(at).mul_f64(rng.f64());
            plan.push((later, n));
            report.republished += 1;
        }
    }
    plan.sort();
    plan
}

/// The producer: each publish of `plan` at its time, tried again after an error (up to 50
/// times, 100 ms apart: a broker that refuses that long is not a storm's doing).
async fn produce<P, PF, PE>(
    plan: Vec<(Duration, usize)>,
    ids: &[String],
    publish: &P,
    errors: &AtomicUsize,
    started: Instant,
) -> Result<(), String>
where
    P: Fn(String, u64) -> PF,
    PF: Future<Output = Result<(), PE>>,
    PE: Into<BoxError>,
{
    const TRIES: usize = 50;
    for (at, n) in plan {
        tokio::time::sleep_until((started + at).into()).await;
        let mut tries = 0;
        loop {
            let published: Result<(), BoxError> =
                match tokio::time::timeout(LIMIT, publish(ids[n].clone(), n as u64)).await {
                    Ok(published) => published.map_err(Into::into),
                    Err(_) => Err(format!("no answer in {} s", LIMIT.as_secs()).into()),
                };
            match published {
                Ok(()) => break,
                Err(_) if tries + 1 < TRIES => {
                    tries += 1;
                    errors.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => {
                    return Err(format!("publishing {} failed {TRIES} times: {e}", ids[n]));
                }
            }
        }
    }
    Ok(())
}

/// The child's exit status, if it has exited.
fn exited(child: &mut Child) -> Option<ExitStatus> {
    child.try_wait().ok().flatten()
}

/// SIGKILL to the consumer's process group (on Unix; the process alone elsewhere), and the
/// wait that reaps the process.
async fn kill(child: &mut Child) {
    // The group is the one `start` made for this child, whose id stays reserved until the
    // child is reaped below.
    #[cfg(unix)]
    if let Some(group) = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = child.kill().await;
}

/// The audit's rows, or what it failed with.
async fn read<A, AF, AE>(audit: &A) -> Result<Vec<(String, i64)>, String>
where
    A: Fn() -> AF,
    AF: Future<Output = Result<Vec<(String, i64)>, AE>>,
    AE: Into<BoxError>,
{
    match tokio::time::timeout(LIMIT, audit()).await {
        Ok(counts) => counts.map_err(|e| format!("the audit failed: {}", e.into())),
        Err(_) => Err(format!("the audit gave no answer in {} s", LIMIT.as_secs())),
    }
}

/// Every effect the audit counts, of any id.
fn total(counts: &[(String, i64)]) -> i64 {
    counts.iter().map(|(_, n)| n).sum()
}

/// Fills the report's `lost` and `doubled` from the audit's counts of the storm's `ids`.
fn verdict(ids: &[String], counts: &[(String, i64)], report: &mut ChaosReport) {
    let mut effects: HashMap<&str, i64> = HashMap::new();
    for (id, n) in counts {
        *effects.entry(id.as_str()).or_default() += n;
    }
    report.lost = ids
        .iter()
        .filter(|id| effects.get(id.as_str()).copied().unwrap_or(0) == 0)
        .cloned()
        .collect();
    report.doubled = ids
        .iter()
        .filter_map(|id| {
            let n = effects.get(id.as_str()).copied().unwrap_or(0);
            (n > 1).then(|| (id.clone(), n))
        })
        .collect();
}

/// A [`ChaosFailure::Broken`] with the report's time so far.
fn broken(what: String, mut report: ChaosReport, started: Instant) -> ChaosFailure {
    report.elapsed = started.elapsed();
    ChaosFailure::Broken { what, report }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_names_lost_and_doubled_messages() {
        let ids: Vec<String> = ["a", "b", "c"].map(str::to_owned).to_vec();
        let counts = vec![
            ("a".to_owned(), 1),
            ("c".to_owned(), 1),
            ("c".to_owned(), 1),
            ("other".to_owned(), 5),
        ];
        let mut report = ChaosReport::default();
        verdict(&ids, &counts, &mut report);
        assert_eq!(report.lost, ["b"]);
        assert_eq!(report.doubled, [("c".to_owned(), 2)]);
        assert!(!report.exact());
    }

    #[test]
    fn the_plan_publishes_every_message_and_retries_later() {
        let config = ChaosConfig {
            messages: 100,
            producer_retries: 0.5,
            seed: 7,
            ..ChaosConfig::default()
        };
        let mut report = ChaosReport::default();
        let plan = publish_plan(&config, &mut fastrand::Rng::with_seed(7), &mut report);
        assert_eq!(plan.len(), 100 + report.republished);
        assert!(report.republished > 20, "{}", report.republished);
        for n in 0..100 {
            let times: Vec<Duration> = plan.iter().filter(|p| p.1 == n).map(|p| p.0).collect();
            assert!(!times.is_empty() && times.len() <= 2);
            assert!(times.iter().all(|t| *t <= config.storm));
        }
        assert!(plan.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
    }
}
