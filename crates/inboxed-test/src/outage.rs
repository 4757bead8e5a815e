//! A downstream outage in the middle of a stream, for any broker: the handler's downstream
//! service is down for a while, every delivery meanwhile fails transiently, and afterwards
//! every message must be applied once with nothing dead-lettered but a poison that fails on its
//! own, whose attempts run out after the outage as they would without one. Run at the library's
//! defaults (`ProcessorConfig::default()`, `ConsumerConfig::default()`; for store-then-process,
//! `WorkerConfig::default()`) but for the ladder ([`ladder`]).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::{
    Consumer, ConsumerConfig, ConsumerName, DeliverySource, KillSwitch, Ladder, Processor,
    ProcessorConfig,
};

use crate::handler::Script;
use crate::{Backend, Ledger, TestDb};

/// The poison's id: it fails transiently on every delivery, outage or not.
pub const POISON: &str = "o-poison";

/// The ladder of the outage tests: 1 s, 2 s, 4 s, 8 s, so that the poison's five attempts end
/// about 15 s after the outage rather than the default ladder's six and a half minutes. The
/// outage itself charges nothing whatever the ladder (what fails while the switch is open
/// keeps its attempt number, and so its first step); each broker's ladder test checks the
/// default's delays against the clock.
#[must_use]
pub fn ladder() -> Ladder {
    Ladder::new([1, 2, 4, 8].map(Duration::from_secs))
}

/// The messages of the stream, `messages` of them crediting 1 each (each holding its
/// transaction 200 ms, as a call to a downstream service would), then the poison.
#[must_use]
pub fn stream(messages: i64) -> Vec<inboxed_core::Envelope> {
    let mut all = clean_stream(messages);
    let poison = Script {
        fail: Some("transient".into()),
        ..Script::default()
    };
    all.insert(
        usize::try_from(messages / 10).unwrap_or(0),
        poison.message(POISON),
    );
    all
}

/// [`stream`] without the poison: for an in-order broker, where a poison holds up its
/// partition for the whole of its attempts.
#[must_use]
pub fn clean_stream(messages: i64) -> Vec<inboxed_core::Envelope> {
    (0..messages)
        .map(|i| {
            Script {
                sleep_ms: 200,
                ..Script::default()
            }
            .message(&format!("o-{i}"))
        })
        .collect()
}

/// What the outage came to.
#[derive(Debug)]
pub struct Outage {
    /// Whether the kill switch was seen open during the outage.
    pub opened: bool,
    /// Whether it was closed at the end.
    pub closed_after: bool,
    /// The most deliveries the broker reported unacknowledged during the outage, by `unacked`.
    pub max_unacked: u32,
    /// From the end of the outage to the last message applied.
    pub drained_in: Duration,
    /// Handler calls during the outage: what the downstream was asked while it was down.
    pub calls_during_outage: u32,
    /// At the end of the outage, the most attempts charged to a message other than the poison
    /// (net of forgiven ones): what the outage cost them.
    pub max_charged: i64,
}

/// Consumes `source` (holding [`stream`]`(messages)`, published) at the defaults (but for
/// `switch`, which a test of the defaults gives as [`KillSwitch::new`]), with the downstream
/// down for `outage` once 40 messages are applied, sampling `unacked` (the broker's
/// unacknowledged deliveries) every 5 s meanwhile. Returns once every message is applied and
/// the poison dead-lettered, or after `outage` plus 5 minutes, for the caller's assertions to
/// tell.
///
/// # Panics
/// When the consumer loop fails.
pub async fn downstream_outage<B, Src, U, UFut>(
    db: &TestDb<B>,
    source: Src,
    messages: i64,
    outage: Duration,
    switch: KillSwitch,
    unacked: U,
) -> Outage
where
    B: Backend,
    Src: DeliverySource + 'static,
    U: Fn() -> UFut,
    UFut: Future<Output = u32>,
{
    let config = ProcessorConfig::default()
        .kill_switch(switch)
        .ladder(ladder());
    consume_through(db, source, config, messages, outage, true, unacked).await
}

/// [`downstream_outage`] for an in-order broker (Kafka): [`clean_stream`]`(messages)`, published,
/// consumed at the defaults, the default ladder included. The switch never opens there (one
/// message is retried in place at a time, and it counts distinct messages); what keeps the
/// message at the head from being dead-lettered is the ladder's waits.
///
/// # Panics
/// When the consumer loop fails.
pub async fn in_order_outage<B, Src>(
    db: &TestDb<B>,
    source: Src,
    messages: i64,
    outage: Duration,
) -> Outage
where
    B: Backend,
    Src: DeliverySource + 'static,
{
    let config = ProcessorConfig::default();
    consume_through(db, source, config, messages, outage, false, || async { 0 }).await
}

/// The consumer loop at `config` (and `ConsumerConfig::default()`) over `source` while
/// [`Watch`] runs the outage; stopped once the stream is drained.
async fn consume_through<B, Src, U, UFut>(
    db: &TestDb<B>,
    source: Src,
    config: ProcessorConfig,
    messages: i64,
    outage: Duration,
    poison: bool,
    unacked: U,
) -> Outage
where
    B: Backend,
    Src: DeliverySource + 'static,
    U: Fn() -> UFut,
    UFut: Future<Output = u32>,
{
    let ledger = Ledger::<B>::default();
    let switch = config.kill_switch.clone();
    let processor = Processor::with_config(
        db.store.clone(),
        ConsumerName::new("ledger").expect("valid name"),
        ledger.clone(),
        config,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let consumer = tokio::spawn(async move {
        Consumer::new(processor, ConsumerConfig::default())
            .run(source, async {
                let _ = stopped.await;
            })
            .await
    });
    let seen = Watch {
        messages,
        poison,
        outage,
        charged: "SELECT CAST(coalesce(max(attempts - forgiven), 0) AS BIGINT) \
                  FROM inboxed_attempts WHERE message_id <> 'o-poison'",
        dead: "SELECT count(*) FROM inboxed_dead_letters",
    }
    .run(db, &ledger, &switch, unacked)
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = stop.send(());
    consumer
        .await
        .expect("consumer task")
        .expect("consumer loop");
    seen
}

/// [`downstream_outage`] for store-then-process workers: [`stream`]`(messages)` stored as
/// inbox rows of consumer `ledger`, drained by a worker at `WorkerConfig::default()` (but for
/// `switch`). `max_unacked` is the most rows seen `processing` during the outage, and
/// `max_charged` the most attempts of a valid row not done at its end.
///
/// # Panics
/// When storing the rows or the worker's run fails.
pub async fn worker_outage<B: Backend>(
    db: &TestDb<B>,
    messages: i64,
    outage: Duration,
    switch: KillSwitch,
) -> Outage {
    let consumer = ConsumerName::new("ledger").expect("valid name");
    let inbox = Inbox::new(db.store.clone(), consumer.clone());
    inbox
        .store_many(&stream(messages))
        .await
        .expect("rows stored");
    let ledger = Ledger::<B>::default();
    let config = WorkerConfig::default()
        .kill_switch(switch.clone())
        .ladder(ladder());
    let worker = Worker::new(db.store.clone(), consumer, ledger.clone(), config);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        worker
            .run(async {
                let _ = stopped.await;
            })
            .await
    });
    let processing = || async {
        let n = db
            .scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'processing'")
            .await;
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    let seen = Watch {
        messages,
        poison: true,
        outage,
        charged: "SELECT CAST(coalesce(max(attempts), 0) AS BIGINT) FROM inboxed_inbox_messages \
                  WHERE message_id <> 'o-poison' AND status <> 'done'",
        dead: "SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'dead'",
    }
    .run(db, &ledger, &switch, processing)
    .await;
    let _ = stop.send(());
    running.await.expect("worker task").expect("worker run");
    seen
}

/// The outage itself, once a consumer or a worker drains the stream.
struct Watch {
    messages: i64,
    /// Whether the stream holds the poison, which ends dead.
    poison: bool,
    outage: Duration,
    /// The most attempts charged to a valid message, at the end of the outage.
    charged: &'static str,
    /// How many messages are dead (dead-lettered, or dead rows).
    dead: &'static str,
}

impl Watch {
    /// Waits for 40 messages applied, takes the downstream down for the outage while sampling
    /// every 5 s, brings it back, and waits for the drain (at most 5 minutes).
    async fn run<B, U, UFut>(
        &self,
        db: &TestDb<B>,
        ledger: &Ledger<B>,
        switch: &KillSwitch,
        unacked: U,
    ) -> Outage
    where
        B: Backend,
        U: Fn() -> UFut,
        UFut: Future<Output = u32>,
    {
        let rows = || db.scalar("SELECT count(*) FROM ledger");
        let started = Instant::now();
        while rows().await < 40 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the stream did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ledger.downstream_down.store(true, Ordering::SeqCst);
        let calls_before = ledger.calls();
        let down_at = Instant::now();
        let (mut opened, mut max_unacked) = (false, 0);
        while down_at.elapsed() < self.outage {
            tokio::time::sleep(Duration::from_secs(5).min(self.outage)).await;
            opened |= switch.is_open();
            max_unacked = max_unacked.max(unacked().await);
        }
        let max_charged = db.scalar(self.charged).await;
        let calls_during_outage = ledger.calls() - calls_before;
        ledger.downstream_down.store(false, Ordering::SeqCst);
        let up_at = Instant::now();
        let expected = self.messages + i64::from(self.poison);
        while rows().await + db.scalar(self.dead).await < expected
            && up_at.elapsed() < Duration::from_secs(300)
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Outage {
            opened,
            closed_after: !switch.is_open(),
            max_unacked,
            drained_in: up_at.elapsed(),
            calls_during_outage,
            max_charged,
        }
    }
}

impl Outage {
    /// What a consumer's outage at the defaults must come to: every message of the stream
    /// applied once, nothing dead-lettered but the poison (after its own attempts), at most one
    /// attempt charged to a valid message, the downstream barely called while down, the switch
    /// opened and closed, and at most `unacked` deliveries held.
    ///
    /// # Panics
    /// When any of it does not hold.
    pub async fn assert_consumer_came_through<B: Backend>(
        &self,
        db: &TestDb<B>,
        messages: i64,
        unacked: u32,
    ) {
        println!("{self:?}");
        assert_eq!(
            crate::conformance::ledger_state(db).await,
            (messages, messages),
            "every message applied once"
        );
        let letters = (
            db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
            db.scalar(
                "SELECT count(*) FROM inboxed_dead_letters \
                 WHERE message_id = 'o-poison' AND reason = 'attempts_exhausted'",
            )
            .await,
        );
        assert_eq!(
            letters,
            (1, 1),
            "nothing dead-lettered but the poison, after its own attempts"
        );
        assert!(
            self.max_charged <= 1,
            "the outage charged a valid message at most the one failure before the switch \
             opened: {}",
            self.max_charged
        );
        assert!(
            self.calls_during_outage <= 80,
            "the consumer stopped calling the downstream: {} calls in the outage",
            self.calls_during_outage
        );
        assert!(self.opened, "the kill switch opened during the outage");
        assert!(self.closed_after, "and closed after it");
        assert!(
            self.max_unacked <= unacked,
            "the broker's unacknowledged deliveries stayed within {unacked}: {}",
            self.max_unacked
        );
    }

    /// What an in-order broker's outage at the defaults must come to: every message applied
    /// once, nothing dead-lettered, the message at the head charged less than `max_attempts`.
    ///
    /// # Panics
    /// When any of it does not hold.
    pub async fn assert_in_order_came_through<B: Backend>(&self, db: &TestDb<B>, messages: i64) {
        println!("{self:?}");
        assert_eq!(
            crate::conformance::ledger_state(db).await,
            (messages, messages),
            "every message applied once"
        );
        assert_eq!(
            db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
            0,
            "nothing dead-lettered"
        );
        assert!(
            (1..5).contains(&self.max_charged),
            "the head was charged its failures in the outage, fewer than its five attempts: {}",
            self.max_charged
        );
    }
}
