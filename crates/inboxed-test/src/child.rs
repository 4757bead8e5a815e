//! Crash tests with real processes. The test binary re-runs itself as a child consumer
//! (`<exe> <test name> --exact`, with `INBOXED_CHILD` set), the parent plays the broker over the
//! child's stdin and stdout, and kills the child with SIGKILL at the chosen point.
//!
//! Protocol: the parent writes one JSON [`Line`] per delivery and closes stdin; the child
//! settles each through the real consumer path and prints `inboxed-child: acked <id>` or
//! `inboxed-child: requeued <id>`. With `INBOXED_FAULT=pause_before_ack` the child prints
//! `inboxed-child: committed <id>` where it would ack and then stops, so the parent kills it
//! between commit and ack. With `INBOXED_HANG=1`, a message scripted to hang prints
//! `inboxed-child: in-handler <id>` before its commit.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use inboxed_core::{
    BoxError, ConsumerName, Delivery, Envelope, EnvelopeError, MessageId, Processor,
    ProcessorConfig, settle,
};

use crate::backend::Backend;
use crate::handler::Ledger;

/// One delivery sent to a child.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Line {
    /// Message id.
    pub id: String,
    /// Payload (a [`Script`](crate::Script) as JSON).
    pub payload: String,
    /// The broker's delivery count, or `None` to make the child count attempts durably.
    pub count: Option<u32>,
}

/// Where the parent kills the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No kill; the child runs until its input ends (or it aborts itself).
    None,
    /// Kill after the first commit, before its ack.
    BetweenCommitAndAck,
    /// Kill inside the handler of a message scripted with `hang`, before the commit.
    BeforeCommit,
}

/// The parent's model of a broker: unacked messages are delivered again to the next child.
#[derive(Debug, Default)]
pub struct Broker {
    pending: VecDeque<(String, String, u32)>,
    /// Ids acked so far, in order.
    pub acked: Vec<String>,
    /// Whether deliveries carry the broker's count (otherwise the store counts attempts).
    pub broker_counts: bool,
    /// Whether the child settles all its deliveries with one `process_batch`.
    pub batch: bool,
}

impl Broker {
    /// A broker model; `broker_counts` says whether deliveries carry a delivery count.
    #[must_use]
    pub fn new(broker_counts: bool) -> Self {
        Self {
            broker_counts,
            ..Self::default()
        }
    }

    /// Queues a message.
    pub fn publish(&mut self, id: &str, payload: &Envelope) {
        let body = String::from_utf8_lossy(payload.payload()).into_owned();
        self.pending.push_back((id.to_owned(), body, 0));
    }

    /// Messages not acked yet.
    #[must_use]
    pub fn unacked(&self) -> usize {
        self.pending.len()
    }

    /// Starts a child consumer for `test` on `locator`, delivers every unacked message, and
    /// returns once the child exits or has been killed at `fault`. Returns whether it was
    /// killed by the parent.
    pub async fn run_child(&mut self, test: &str, locator: &str, fault: Fault) -> bool {
        let exe = std::env::current_exe().expect("current test executable");
        let mut cmd = Command::new(exe);
        cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env("INBOXED_CHILD", locator)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        match fault {
            Fault::BetweenCommitAndAck => {
                cmd.env("INBOXED_FAULT", "pause_before_ack");
            }
            Fault::BeforeCommit => {
                cmd.env("INBOXED_HANG", "1");
            }
            Fault::None => {}
        }
        if self.batch {
            cmd.env("INBOXED_BATCH", "1");
        }
        let mut child = cmd.spawn().expect("spawn child consumer");
        let mut stdin = child.stdin.take().expect("child stdin");
        let mut input = String::new();
        for (id, payload, deliveries) in &mut self.pending {
            *deliveries += 1;
            let count = self.broker_counts.then_some(*deliveries);
            let line = Line {
                id: id.clone(),
                payload: payload.clone(),
                count,
            };
            input.push_str(&serde_json::to_string(&line).expect("line"));
            input.push('\n');
        }
        let _ = stdin.write_all(input.as_bytes()).await;
        drop(stdin);
        let mut lines = BufReader::new(child.stdout.take().expect("child stdout")).lines();
        let mut killed = false;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        while let Ok(Ok(Some(line))) = tokio::time::timeout_at(deadline, lines.next_line()).await {
            // libtest may print "test <name> ... " on the same line before our output.
            let Some((_, said)) = line.split_once("inboxed-child: ") else {
                continue;
            };
            if let Some(id) = said.strip_prefix("acked ") {
                self.pending.retain(|(p, _, _)| p != id);
                self.acked.push(id.to_owned());
            } else if said.starts_with("committed ") || said.starts_with("in-handler ") {
                child.kill().await.expect("SIGKILL the child");
                killed = true;
                break;
            }
        }
        let _ = child.wait().await;
        killed
    }
}

/// Starts this test binary again as a child *worker* (store-then-process) on `locator`, with
/// `INBOXED_HANG=1` so that a row scripted to hang stops its batch mid-way; with `sigterm`, the
/// child runs until SIGTERM instead.
pub fn spawn_worker_child(test: &str, locator: &str, sigterm: bool) -> tokio::process::Child {
    spawn_worker_child_with(test, locator, sigterm, 50)
}

/// [`spawn_worker_child`] with the child's `max_attempts`.
pub fn spawn_worker_child_with(
    test: &str,
    locator: &str,
    sigterm: bool,
    max_attempts: u32,
) -> tokio::process::Child {
    let exe = std::env::current_exe().expect("current test executable");
    let mut cmd = Command::new(exe);
    cmd.env("INBOXED_CHILD_MAX_ATTEMPTS", max_attempts.to_string());
    if sigterm {
        cmd.env("INBOXED_CHILD_SIGTERM", "1");
    }
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("INBOXED_CHILD", locator)
        .env("INBOXED_CHILD_MODE", "worker")
        .env("INBOXED_HANG", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn child worker")
}

/// Waits for the child to print `inboxed-child: <what>`, then kills it with SIGKILL.
/// Returns whether the line came before the deadline.
pub async fn kill_when(child: &mut tokio::process::Child, what: &str) -> bool {
    let stdout = child.stdout.take().expect("child stdout");
    let mut lines = BufReader::new(stdout).lines();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    let mut seen = false;
    while let Ok(Ok(Some(line))) = tokio::time::timeout_at(deadline, lines.next_line()).await {
        if line
            .split_once("inboxed-child: ")
            .is_some_and(|(_, said)| said.starts_with(what))
        {
            seen = true;
            break;
        }
    }
    child.kill().await.expect("SIGKILL the child");
    let _ = child.wait().await;
    seen
}

/// Whether this child process was started as a worker.
#[must_use]
pub fn child_is_worker() -> bool {
    std::env::var("INBOXED_CHILD_MODE").as_deref() == Ok("worker")
}

/// The child worker: processes the `ledger` consumer's rows. With `INBOXED_CHILD_SIGTERM` it
/// runs `Worker::run` until SIGTERM and exits when that returns; otherwise it loops batches
/// until killed.
pub async fn worker_child_main<B: Backend>(locator: &str) {
    use inboxed_core::inbox::{Worker, WorkerConfig};
    let store = B::attach(locator).await;
    let consumer = ConsumerName::new("ledger").expect("consumer name");
    let max_attempts = std::env::var("INBOXED_CHILD_MAX_ATTEMPTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    // No delay: the parent's workers pick failed rows up again at once.
    let config = WorkerConfig::default()
        .batch_size(50)
        .max_attempts(max_attempts)
        .ladder(inboxed_core::Ladder::constant(Duration::ZERO));
    let worker = Worker::new(store, consumer, Ledger::<B>::default(), config);
    if std::env::var_os("INBOXED_CHILD_SIGTERM").is_some() {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        println!("inboxed-child: running");
        let stopped = async move {
            term.recv().await;
        };
        worker.run(stopped).await.expect("worker run");
        println!("inboxed-child: stopped");
        return;
    }
    loop {
        if let Err(e) = worker.run_once().await {
            println!("inboxed-child: batch failed {e}");
        }
    }
}

/// The database locator when this process is a child consumer.
#[must_use]
pub fn child_locator() -> Option<String> {
    std::env::var("INBOXED_CHILD").ok()
}

struct ChildDelivery {
    line: Line,
    pause_before_ack: bool,
}

impl Delivery for ChildDelivery {
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        Ok(Envelope::new(
            MessageId::new(self.line.id.clone())?,
            self.line.payload.as_bytes().to_vec(),
        ))
    }

    fn payload(&self) -> &[u8] {
        self.line.payload.as_bytes()
    }

    fn delivery_count(&self) -> Option<u32> {
        self.line.count
    }

    async fn ack(self) -> Result<(), BoxError> {
        if self.pause_before_ack {
            println!("inboxed-child: committed {}", self.line.id);
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        println!("inboxed-child: acked {}", self.line.id);
        Ok(())
    }

    async fn requeue(self, _delay: Option<Duration>) -> Result<(), BoxError> {
        println!("inboxed-child: requeued {}", self.line.id);
        Ok(())
    }

    async fn reject(self) -> Result<(), BoxError> {
        println!("inboxed-child: rejected {}", self.line.id);
        Ok(())
    }
}

/// The child consumer: reads deliveries from stdin and settles each through the real
/// processor and the consumer path's ack ordering.
pub async fn child_main<B: Backend>(locator: &str) {
    let store = B::attach(locator).await;
    let consumer = ConsumerName::new("ledger").expect("consumer name");
    let processor = Processor::with_config(
        store,
        consumer,
        Ledger::<B>::default(),
        ProcessorConfig::default(),
    );
    let pause_before_ack = std::env::var("INBOXED_FAULT").as_deref() == Ok("pause_before_ack");
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    if std::env::var_os("INBOXED_BATCH").is_some() {
        // Every delivery in one batch, acked after it returns (those that settled).
        let mut batch = Vec::new();
        while let Ok(Some(text)) = lines.next_line().await {
            let line: Line = serde_json::from_str(&text).expect("delivery line");
            let id = MessageId::new(line.id).expect("valid test id");
            batch.push(Envelope::new(id, line.payload.into_bytes()));
        }
        for (envelope, result) in batch.iter().zip(processor.process_batch(&batch).await) {
            if result.is_ok() {
                println!("inboxed-child: acked {}", envelope.id());
            }
        }
        return;
    }
    while let Ok(Some(text)) = lines.next_line().await {
        let line: Line = serde_json::from_str(&text).expect("delivery line");
        let delivery = ChildDelivery {
            line,
            pause_before_ack,
        };
        settle(&processor, delivery, None).await.expect("settle");
    }
}
