//! The process-level harness: your consumer binary, killed with SIGKILL at random points and
//! restarted, while a producer publishes through your real broker with producer retries; then
//! a ledger audit of your own says whether every message took effect exactly once.
//!
//! Where the [`Kit`](crate::Kit)'s checks attack one handler call at a time inside the test
//! process, this attacks the whole service as it runs in production: its broker client, its
//! acks, its prefetch, its start-up (migrations, connecting) under kills that land wherever
//! they land. A kill between a commit and its ack, inside a handler, in the
//! middle of a COMMIT or a reconnect: whatever the seed picks.

mod audit;
mod producer;
mod report;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use inboxed_core::observe::{DeadLetterFilter, ObserveStore};
use inboxed_core::{BoxError, ConsumerName};
use tokio::process::{Child, Command};

use audit::{read, sort_dead_lettered, total, verdict};
use producer::{produce, publish_plan};
use report::broken;
pub use report::{ChaosFailure, ChaosReport};

/// How long one publish or one audit may take before it counts as failed.
const LIMIT: Duration = Duration::from_secs(30);

/// The most dead letters [`Chaos::with_dead_letters_of`] reads, newest first: more than a
/// storm publishes.
const DEAD_LETTERS_READ: u32 = 100_000;

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

impl ChaosConfig {
    /// Sets [`ChaosConfig::messages`].
    #[must_use]
    pub fn messages(mut self, messages: usize) -> Self {
        self.messages = messages;
        self
    }

    /// Sets [`ChaosConfig::storm`].
    #[must_use]
    pub fn storm(mut self, storm: Duration) -> Self {
        self.storm = storm;
        self
    }

    /// Sets [`ChaosConfig::run_between_kills`].
    #[must_use]
    pub fn run_between_kills(mut self, run_between_kills: (Duration, Duration)) -> Self {
        self.run_between_kills = run_between_kills;
        self
    }

    /// Sets [`ChaosConfig::producer_retries`].
    #[must_use]
    pub fn producer_retries(mut self, producer_retries: f64) -> Self {
        self.producer_retries = producer_retries;
        self
    }

    /// Sets [`ChaosConfig::settle`].
    #[must_use]
    pub fn settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// Sets [`ChaosConfig::quiet`].
    #[must_use]
    pub fn quiet(mut self, quiet: Duration) -> Self {
        self.quiet = quiet;
        self
    }

    /// Sets [`ChaosConfig::seed`].
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

/// A reader of dead letters: each message id with its reason.
type DeadLetters = Box<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<Vec<(String, String)>, BoxError>> + Send>>
        + Send
        + Sync,
>;

/// The harness: a function that makes the command of your consumer (called for every start),
/// and a [`ChaosConfig`].
pub struct Chaos {
    command: Box<dyn Fn() -> Command + Send + Sync>,
    config: ChaosConfig,
    dead_letters: Option<DeadLetters>,
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
            dead_letters: None,
        }
    }

    /// Reads your consumer's dead letters (each message id with its reason: `SELECT
    /// message_id, reason FROM inboxed_dead_letters WHERE consumer_name = '…'`), so that a
    /// message without an effect is reported as dead-lettered, with its reason, instead of
    /// lost, and the harness stops waiting for it. Still a failure: the storm's messages are
    /// good ones, and one dead-lettered by the kills alone used up its attempts on crashes
    /// that were not its doing.
    #[must_use]
    pub fn with_dead_letters<D, DF, DE>(mut self, read: D) -> Self
    where
        D: Fn() -> DF + Send + Sync + 'static,
        DF: Future<Output = Result<Vec<(String, String)>, DE>> + Send + 'static,
        DE: Into<BoxError>,
    {
        self.dead_letters = Some(Box::new(move || {
            let read = read();
            Box::pin(async move { read.await.map_err(Into::into) })
        }));
        self
    }

    /// [`Chaos::with_dead_letters`] read from `store`'s dead-letter table, those of
    /// `consumer`: for a consumer of this library, on any engine.
    #[must_use]
    pub fn with_dead_letters_of<S>(self, store: S, consumer: &ConsumerName) -> Self
    where
        S: ObserveStore + Clone + Send + Sync + 'static,
    {
        let consumer = consumer.as_str().to_owned();
        self.with_dead_letters(move || {
            let (store, consumer) = (store.clone(), consumer.clone());
            async move {
                let filter = DeadLetterFilter {
                    consumer: Some(&consumer),
                    limit: DEAD_LETTERS_READ,
                    ..DeadLetterFilter::default()
                };
                let letters = store.list_dead_letters(&filter).await?;
                Ok::<_, BoxError>(
                    letters
                        .into_iter()
                        .filter_map(|l| l.message_id.map(|id| (id, l.reason)))
                        .collect(),
                )
            }
        })
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
    /// others took theirs within [`ChaosConfig::settle`] (or none and a dead letter, with
    /// [`Chaos::with_dead_letters`]); [`ChaosFailure::Broken`] when the
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
            self.sort_lost(&mut report)
                .await
                .map_err(|what| broken(what, report.clone(), started))?;
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
        self.sort_lost(&mut report)
            .await
            .map_err(|what| broken(what, report.clone(), started))?;
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

    /// Moves the lost messages that are dead-lettered to the report's `dead_lettered`, when
    /// a reader of dead letters was given.
    async fn sort_lost(&self, report: &mut ChaosReport) -> Result<(), String> {
        let Some(read) = &self.dead_letters else {
            return Ok(());
        };
        if report.lost.is_empty() {
            return Ok(());
        }
        let letters = match tokio::time::timeout(LIMIT, read()).await {
            Ok(Ok(letters)) => letters,
            Ok(Err(e)) => return Err(format!("reading the dead letters failed: {e}")),
            Err(_) => {
                return Err(format!(
                    "reading the dead letters gave no answer in {} s",
                    LIMIT.as_secs()
                ));
            }
        };
        sort_dead_lettered(&letters, report);
        Ok(())
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
