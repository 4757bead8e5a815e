//! Crash tests through real brokers. The test binary re-runs itself as a child consumer on a
//! real broker's source (`INBOXED_BROKER_CHILD` holds the database locator); the child prints
//! `inboxed-child: acked <id>` after each ack, or, with `INBOXED_FAULT=pause_before_ack`,
//! `inboxed-child: committed <id>` where it would ack and then stops, so the parent can kill it
//! with SIGKILL between the commit and the ack. The broker redelivers what was never acked.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};

use inboxed_core::{
    AckOrdering, BoxError, Consumer, ConsumerConfig, ConsumerName, Delivery, DeliverySource,
    Envelope, EnvelopeError, Handler, Outcome, Processor, Settled, Store, settle,
};

use crate::backend::{Backend, TestDb};
use crate::conformance::ledger_state;
use crate::handler::{Ledger, SecondConnection};

/// A delivery whose ack prints what happened, or pauses for ever (the kill point).
#[derive(Debug)]
pub struct Announced<D> {
    inner: D,
    pause_before_ack: bool,
}

impl<D: Delivery> Announced<D> {
    fn id(&self) -> String {
        self.inner
            .envelope()
            .map_or_else(|_| "-".to_owned(), |e| e.id().as_str().to_owned())
    }
}

impl<D: Delivery> Delivery for Announced<D> {
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        self.inner.envelope()
    }

    fn payload(&self) -> &[u8] {
        self.inner.payload()
    }

    fn header_value(&self, name: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        self.inner.header_value(name)
    }

    fn delivery_count(&self) -> Option<u32> {
        self.inner.delivery_count()
    }

    fn system(&self) -> Option<&'static str> {
        self.inner.system()
    }

    fn ack_ordering(&self) -> AckOrdering {
        self.inner.ack_ordering()
    }

    fn is_first_delivery(&self) -> bool {
        self.inner.is_first_delivery()
    }

    async fn ack(self) -> Result<(), BoxError> {
        let id = self.id();
        if self.pause_before_ack {
            println!("inboxed-child: committed {id}");
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        self.inner.ack().await?;
        println!("inboxed-child: acked {id}");
        Ok(())
    }

    async fn requeue(self, delay: Option<Duration>) -> Result<(), BoxError> {
        let id = self.id();
        self.inner.requeue(delay).await?;
        println!("inboxed-child: requeued {id}");
        Ok(())
    }

    async fn reject(self) -> Result<(), BoxError> {
        self.inner.reject().await
    }

    async fn extend_deadline(&self, by: Duration) -> Result<(), BoxError> {
        self.inner.extend_deadline(by).await
    }
}

/// A broker's source whose deliveries are [`Announced`].
#[derive(Debug)]
pub struct AnnouncedSource<S> {
    inner: S,
    pause_before_ack: bool,
}

impl<S: DeliverySource> DeliverySource for AnnouncedSource<S> {
    type Delivery = Announced<S::Delivery>;

    async fn next(&mut self) -> Option<Result<Self::Delivery, BoxError>> {
        let pause_before_ack = self.pause_before_ack;
        self.inner.next().await.map(|r| {
            r.map(|inner| Announced {
                inner,
                pause_before_ack,
            })
        })
    }

    /// The wrapped source's, so that a Kafka child keeps its group while it waits.
    async fn idle(&mut self) {
        self.inner.idle().await;
    }
    async fn close(self) {
        self.inner.close().await;
    }
}

/// The database locator when this process is a broker child.
#[must_use]
pub fn broker_child_locator() -> Option<String> {
    std::env::var("INBOXED_BROKER_CHILD").ok()
}

/// The child: settles `source`'s deliveries through the `ledger` consumer one at a time until
/// it is killed; in batches of up to `INBOXED_CONSUMER_BATCH` when that is set,
/// `INBOXED_CONSUMER_CONCURRENCY` at once when that is, and with `INBOXED_MAX_ATTEMPTS` and
/// `INBOXED_ATTEMPT_COUNTING=durable` when those are; with `INBOXED_DOWNSTREAM_DOWN=1` the
/// handler's downstream service is down (every call fails transiently) for the child's life.
/// With `INBOXED_CHILD_HANDLER=second_connection` its handler is the known-bad
/// [`SecondConnection`], for a harness to catch.
pub async fn broker_child_main<B: Backend, S: DeliverySource + 'static>(locator: &str, source: S) {
    let store = B::attach(locator).await;
    if std::env::var("INBOXED_CHILD_HANDLER").as_deref() == Ok("second_connection") {
        let handler = SecondConnection::<B> {
            store: store.clone(),
        };
        return consume(store, handler, source).await;
    }
    let ledger = Ledger::<B>::default();
    if std::env::var("INBOXED_DOWNSTREAM_DOWN").as_deref() == Ok("1") {
        ledger
            .downstream_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    consume(store, ledger, source).await;
}

/// The child's consumer loop, with `handler`.
async fn consume<St: Store, H: Handler<St::Db>, S: DeliverySource + 'static>(
    store: St,
    handler: H,
    source: S,
) {
    let consumer = ConsumerName::new("ledger").expect("consumer name");
    let mut config = inboxed_core::ProcessorConfig::default();
    if let Some(n) = std::env::var("INBOXED_MAX_ATTEMPTS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        config = config.max_attempts(n);
    }
    if std::env::var("INBOXED_ATTEMPT_COUNTING").as_deref() == Ok("durable") {
        config.attempt_counting = inboxed_core::AttemptCounting::Durable;
    }
    let processor = Processor::with_config(store, consumer, handler, config);
    let source = AnnouncedSource {
        inner: source,
        pause_before_ack: std::env::var("INBOXED_FAULT").as_deref() == Ok("pause_before_ack"),
    };
    let batch = std::env::var("INBOXED_CONSUMER_BATCH")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let concurrency = std::env::var("INBOXED_CONSUMER_CONCURRENCY")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let config = ConsumerConfig::default()
        .concurrency(concurrency)
        .batch_size(batch);
    Consumer::new(processor, config)
        .run(source, std::future::pending::<()>())
        .await
        .expect("consumer loop");
}

/// Starts this test binary again as a broker child of `test` on `locator`, with `env` added
/// (the broker's address and queue, `INBOXED_FAULT`).
pub fn spawn_broker_child(test: &str, locator: &str, env: &[(&str, &str)]) -> Child {
    let exe = std::env::current_exe().expect("current test executable");
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("INBOXED_BROKER_CHILD", locator)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    cmd.spawn().expect("spawn broker child")
}

/// Reads the child's announcements until `done` says enough (given every `(what, id)` so
/// far) or `timeout` passes, then kills it with SIGKILL. Returns the announcements.
pub async fn watch_then_kill(
    child: &mut Child,
    timeout: Duration,
    mut done: impl FnMut(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    let stdout: ChildStdout = child.stdout.take().expect("child stdout");
    let mut lines = BufReader::new(stdout).lines();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut said = Vec::new();
    while !done(&said) {
        let Ok(Ok(Some(line))) = tokio::time::timeout_at(deadline, lines.next_line()).await else {
            break;
        };
        if let Some((_, rest)) = line.split_once("inboxed-child: ")
            && let Some((what, id)) = rest.split_once(' ')
        {
            said.push((what.to_owned(), id.to_owned()));
        }
    }
    child.kill().await.expect("SIGKILL the child");
    let _ = child.wait().await;
    said
}

/// The messages of [`killed_between_commit_and_ack`]: ids (their keys) and credited amounts,
/// in the order the broker delivers them.
pub const CRASH_MESSAGES: [(&str, i64); 3] = [("k-1", 25), ("k-2", 5), ("k-3", 1)];

/// The parent's half of every adapter's SIGKILL case. With [`CRASH_MESSAGES`] published on the
/// broker, a child started with `env` commits `k-1` and is killed before its ack; a second
/// child then settles all three, `k-1` as a redelivered duplicate. Asserts that the ledger shows
/// each effect once.
pub async fn killed_between_commit_and_ack<B: Backend>(
    test: &str,
    db: &TestDb<B>,
    env: &[(&str, &str)],
) {
    let wait = Duration::from_secs(60);
    let mut faulty = env.to_vec();
    faulty.push(("INBOXED_FAULT", "pause_before_ack"));
    let mut child = spawn_broker_child(test, &db.locator, &faulty);
    let said = watch_then_kill(&mut child, wait, |s| !s.is_empty()).await;
    assert_eq!(said, [("committed".to_owned(), "k-1".to_owned())]);
    assert_eq!(
        ledger_state(db).await,
        (1, 25),
        "k-1 committed before the kill"
    );

    let mut child = spawn_broker_child(test, &db.locator, env);
    let said = watch_then_kill(&mut child, wait, |s| s.len() == 3).await;
    assert_eq!(ids_said(&said, "acked"), ["k-1", "k-2", "k-3"], "{said:?}");
    assert_eq!(ledger_state(db).await, (3, 31), "k-1 was not applied twice");
}

/// [`killed_between_commit_and_ack`] for a consumer in batches of up to 8: the child commits
/// the batch of [`CRASH_MESSAGES`] and is killed before any of their acks; a second child, also
/// in batches, settles the three redelivered messages as duplicates. The source must let at
/// least three deliveries be in flight (prefetch).
pub async fn killed_between_batch_commit_and_ack<B: Backend>(
    test: &str,
    db: &TestDb<B>,
    env: &[(&str, &str)],
) {
    let wait = Duration::from_secs(60);
    let mut batched = env.to_vec();
    batched.push(("INBOXED_CONSUMER_BATCH", "8"));
    let mut faulty = batched.clone();
    faulty.push(("INBOXED_FAULT", "pause_before_ack"));
    let mut child = spawn_broker_child(test, &db.locator, &faulty);
    let said = watch_then_kill(&mut child, wait, |s| s.len() == 3).await;
    assert_eq!(
        ids_said(&said, "committed"),
        ["k-1", "k-2", "k-3"],
        "{said:?}"
    );
    assert_eq!(ledger_state(db).await, (3, 31), "committed before the kill");

    let mut child = spawn_broker_child(test, &db.locator, &batched);
    let said = watch_then_kill(&mut child, wait, |s| s.len() == 3).await;
    assert_eq!(ids_said(&said, "acked"), ["k-1", "k-2", "k-3"], "{said:?}");
    assert_eq!(ledger_state(db).await, (3, 31), "nothing was applied twice");
}

/// The ids the child announced as `what`, sorted.
fn ids_said<'a>(said: &'a [(String, String)], what: &str) -> Vec<&'a str> {
    let mut ids: Vec<&str> = said
        .iter()
        .filter(|(w, _)| w == what)
        .map(|(_, id)| id.as_str())
        .collect();
    ids.sort_unstable();
    ids
}

/// Resolves once the ledger holds `rows` rows and the dead letters number `dead` (or after 30
/// s, for the test's own assertions to report), and a moment later, for the acks that follow
/// the last commits: a consumer loop's shutdown signal.
pub async fn until_settled<B: Backend>(db: &TestDb<B>, rows: i64, dead: i64) {
    for _ in 0..600 {
        let r = db.scalar("SELECT count(*) FROM ledger").await;
        let d = db.scalar("SELECT count(*) FROM inboxed_dead_letters").await;
        if (r, d) == (rows, dead) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// Takes `n` deliveries from `source` and settles each through `processor` in this process;
/// every one must end acked. Returns their outcomes in delivery order.
pub async fn settle_acked<S, H, Src>(
    processor: &Processor<S, H>,
    source: &mut Src,
    n: usize,
) -> Vec<Outcome>
where
    S: Store,
    H: Handler<S::Db>,
    Src: DeliverySource,
{
    let mut outcomes = Vec::new();
    for _ in 0..n {
        let delivery = source.next().await.expect("source open").expect("delivery");
        match settle(processor, delivery, None).await.expect("settled") {
            Settled::Acked(outcome) => outcomes.push(outcome),
            other => panic!("not acked: {other:?}"),
        }
    }
    outcomes
}

/// Settles the three deliveries every adapter's first test sends (a credit of 7, the same
/// message again as a producer retry, and the same body without a key) and checks what they
/// did: processed, duplicate and dead-lettered, in that order, and one ledger row of 7.
///
/// # Panics
/// When any of that differs.
pub async fn settle_duplicate_and_keyless<B, Src>(
    db: &TestDb<B>,
    processor: &Processor<B::Store, Ledger<B>>,
    source: &mut Src,
) where
    B: Backend,
    Src: DeliverySource,
{
    let outcomes = settle_acked(processor, source, 3).await;
    assert_eq!(outcomes[..2], [Outcome::Processed, Outcome::Duplicate]);
    assert!(
        matches!(outcomes[2], Outcome::DeadLettered { .. }),
        "{outcomes:?}"
    );
    assert_eq!(ledger_state(db).await, (1, 7));
}
