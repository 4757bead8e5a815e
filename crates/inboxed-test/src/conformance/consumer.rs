//! The consumer loop: bounded concurrency over a delivery source, acking only after commit.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inboxed_core::{
    AckOrdering, BoxError, Consumer, ConsumerConfig, Delivery, DeliverySource, Envelope,
    EnvelopeError, MessageId, Outcome, ProcessorConfig, Settled, settle,
};

use super::{ledger_state, processor};
use crate::backend::Backend;
use crate::handler::{Script, credit};

pub(super) type Log = Arc<Mutex<Vec<(String, &'static str, i64)>>>;

/// A delivery whose broker is a log: what was done to it, and what another connection saw
/// committed at its ack.
pub(super) struct Memory<B: Backend> {
    pub(super) id: String,
    pub(super) payload: Vec<u8>,
    pub(super) store: B::Store,
    pub(super) log: Log,
    /// Acked like a Kafka offset: in order.
    pub(super) in_order: bool,
}

impl<B: Backend> Delivery for Memory<B> {
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        Ok(Envelope::new(
            MessageId::new(self.id.clone())?,
            self.payload.clone(),
        ))
    }
    fn payload(&self) -> &[u8] {
        &self.payload
    }
    fn delivery_count(&self) -> Option<u32> {
        Some(1)
    }
    fn ack_ordering(&self) -> AckOrdering {
        if self.in_order {
            AckOrdering::InOrder
        } else {
            AckOrdering::Individual
        }
    }
    async fn ack(self) -> Result<(), BoxError> {
        if self.id.starts_with("refuse-ack") {
            return Err("the channel closed under it".into());
        }
        // What another connection sees at the moment of the ack: the outcome must be committed.
        let seen = B::settled_rows(&self.store, &self.id).await;
        self.log.lock().expect("log").push((self.id, "ack", seen));
        Ok(())
    }
    async fn requeue(self, _delay: Option<Duration>) -> Result<(), BoxError> {
        self.log.lock().expect("log").push((self.id, "requeue", 0));
        Ok(())
    }
    async fn reject(self) -> Result<(), BoxError> {
        self.log.lock().expect("log").push((self.id, "reject", 0));
        Ok(())
    }
    async fn extend_deadline(&self, _by: Duration) -> Result<(), BoxError> {
        self.log
            .lock()
            .expect("log")
            .push((self.id.clone(), "extend", 0));
        Ok(())
    }
}

pub(super) struct Source<B: Backend>(pub(super) VecDeque<Memory<B>>);

impl<B: Backend> DeliverySource for Source<B> {
    type Delivery = Memory<B>;
    async fn next(&mut self) -> Option<Result<Memory<B>, BoxError>> {
        self.0.pop_front().map(Ok)
    }
}

/// `Consumer::run` with 4 deliveries in flight over 60 messages, each delivered twice in a
/// row (so the copies race) plus two poison messages: every delivery is acked, each ack only
/// once its outcome is committed and visible to another connection, every effect lands once.
pub async fn consumer_acks_only_after_commit<B: Backend>(_test: &str) {
    acks_only_after_commit::<B>(ConsumerConfig::default().concurrency(4)).await;
}

/// The same with 4 batches of up to 8 deliveries in flight: a batch holding a poison message
/// fails and is redone one by one, and still every ack follows its commit.
pub async fn consumer_in_batches_acks_only_after_commit<B: Backend>(_test: &str) {
    let config = ConsumerConfig::default().concurrency(4).batch_size(8);
    acks_only_after_commit::<B>(config).await;
}

async fn acks_only_after_commit<B: Backend>(config: ConsumerConfig) {
    let batched = config.batch_size > 1;
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    let log: Log = Arc::default();
    let mut queue = VecDeque::new();
    let mut push = |id: String, env: Envelope| {
        for _ in 0..2 {
            let (store, log) = (db.store.clone(), log.clone());
            queue.push_back(Memory::<B> {
                id: id.clone(),
                payload: env.payload().to_vec(),
                store,
                log,
                in_order: false,
            });
        }
    };
    for i in 0..60 {
        let id = format!("m-{i}");
        push(id.clone(), credit(&id, 1));
    }
    for id in ["m-poison-1", "m-poison-2"] {
        push(
            id.into(),
            Script {
                fail: Some("permanent".into()),
                ..Script::default()
            }
            .message(id),
        );
    }
    let consumer = Consumer::new(p, config);
    consumer
        .run(Source(queue), std::future::pending::<()>())
        .await
        .unwrap();

    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 124);
    assert!(log.iter().all(|(_, what, _)| *what == "ack"), "{log:?}");
    let early: Vec<_> = log.iter().filter(|(_, _, seen)| *seen != 1).collect();
    assert!(
        early.is_empty(),
        "acked before the outcome was committed: {early:?}"
    );
    // Each good message's handler ran once. A poison message's concurrent copy may run it a
    // second time: it waits on the first copy's claim, which rolls back before that copy's
    // dead letter commits. Both runs roll back, so neither has an effect.
    // In batches, a failed batch's messages run again one by one (only one run commits).
    let calls = handler.calls();
    if batched {
        assert!(handler.batches() >= 8, "{} batches", handler.batches());
    } else {
        assert!((62..=64).contains(&calls), "{calls} handler calls");
        assert_eq!(handler.batches(), 0);
    }
    assert_eq!(ledger_state(&db).await, (60, 60));
    db.finish().await;
}

/// An in-order source (a Kafka partition) in batches of up to 16: ten credits of one account
/// that each check they come right after the previous one, the fourth failing transiently on
/// the handler's calls up to the eighth. Its batch fails, the batch is redone one by one in
/// order up to the failure, the failing message is retried in place, and only then do the
/// rest follow: every credit lands once and in order, and the acks come in order.
pub async fn consumer_in_ordered_batches_keeps_the_order<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _) = processor(&db, ProcessorConfig::default());
    let log: Log = Arc::default();
    let queue: VecDeque<Memory<B>> = (1..=10)
        .map(|amount| {
            let id = format!("o-{amount}");
            let script = Script {
                amount,
                check_order: true,
                fail_first: if amount == 4 { 8 } else { 0 },
                ..Script::default()
            };
            Memory::<B> {
                payload: script.message(&id).payload().to_vec(),
                id,
                store: db.store.clone(),
                log: log.clone(),
                in_order: true,
            }
        })
        .collect();
    let config = ConsumerConfig::default().batch_size(16);
    Consumer::new(p, config)
        .run(Source(queue), std::future::pending::<()>())
        .await
        .unwrap();
    let log = log.lock().unwrap().clone();
    let acked: Vec<&str> = log
        .iter()
        .filter(|(_, what, _)| *what == "ack")
        .map(|(id, _, _)| id.as_str())
        .collect();
    let expected: Vec<String> = (1..=10).map(|n| format!("o-{n}")).collect();
    assert_eq!(acked, expected, "{log:?}");
    assert_eq!(ledger_state(&db).await, (10, 55));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
        0
    );
    db.finish().await;
}

/// While a long handler runs, the broker's in-progress deadline (visibility timeout, NATS
/// `Progress`) is extended on schedule, and the ack still comes after the commit.
pub async fn long_handler_extends_the_delivery_deadline<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _) = processor(&db, ProcessorConfig::default());
    let log: Log = Arc::default();
    let slow = Script {
        amount: 2,
        sleep_ms: 500,
        ..Script::default()
    }
    .message("m-long");
    let delivery = Memory::<B> {
        id: "m-long".into(),
        payload: slow.payload().to_vec(),
        store: db.store.clone(),
        log: log.clone(),
        in_order: false,
    };
    let settled = settle(&p, delivery, Some(Duration::from_millis(100)))
        .await
        .unwrap();
    assert!(
        matches!(settled, Settled::Acked(Outcome::Processed)),
        "{settled:?}"
    );
    let log = log.lock().unwrap().clone();
    let extends = log.iter().filter(|(_, what, _)| *what == "extend").count();
    assert!(extends >= 3, "{log:?}");
    assert_eq!(
        log.last().map(|(_, what, seen)| (*what, *seen)),
        Some(("ack", 1))
    );
    assert_eq!(ledger_state(&db).await, (1, 2));
    db.finish().await;
}

/// An ack the broker refuses after the commit: `settle` fails with an error that names the
/// message and keeps the adapter's cause (`could not ack message refuse-ack-1 with the broker:
/// the channel closed under it`), and the effect stays committed once, for the redelivery to
/// settle as a duplicate.
pub async fn a_failed_ack_names_the_message_and_its_cause<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _) = processor(&db, ProcessorConfig::default());
    let delivery = Memory::<B> {
        id: "refuse-ack-1".to_owned(),
        payload: credit("refuse-ack-1", 9).payload().to_vec(),
        store: db.store.clone(),
        log: Log::default(),
        in_order: false,
    };
    let error = settle(&p, delivery, None)
        .await
        .expect_err("the ack failed");
    assert_eq!(
        inboxed_core::error_chain(&error),
        "could not ack message refuse-ack-1 with the broker: the channel closed under it"
    );
    assert!(error.is_transient());
    assert_eq!(ledger_state(&db).await, (1, 9), "committed before the ack");
    db.finish().await;
}
