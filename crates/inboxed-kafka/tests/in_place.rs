//! A record retried in place waits out the ladder without losing its partition: while the
//! consumer takes nothing, the source pauses its partitions and keeps polling
//! (`DeliverySource::idle`), so librdkafka does not leave the group after
//! `max.poll.interval.ms`. Shown against the same source without the idle polling, where the
//! member leaves the group during the wait and the records after the head are fetched again.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use inboxed_core::{
    BoxError, Consumer, ConsumerConfig, ConsumerName, DeliverySource, Ladder, Processor,
    ProcessorConfig,
};
use inboxed_kafka::{KafkaConfig, KafkaDelivery, KafkaSource};
use inboxed_test::{Backend, Ledger, Pg, Script};

use common::{brokers, publish, topic};

/// The source, counting the records it hands out; `idle` forwarded or not.
struct Counted {
    inner: KafkaSource,
    delivered: Arc<AtomicU32>,
    idle: bool,
}

impl DeliverySource for Counted {
    type Delivery = KafkaDelivery;

    async fn next(&mut self) -> Option<Result<KafkaDelivery, BoxError>> {
        let next = self.inner.next().await;
        self.delivered.fetch_add(1, Ordering::SeqCst);
        next
    }

    async fn idle(&mut self) {
        if self.idle {
            self.inner.idle().await;
        } else {
            std::future::pending::<()>().await;
        }
    }
}

/// Four records, the first failing twice; a ladder of 1 s then 20 s, so that its third attempt
/// waits 20 to 25 s in place, three times `max.poll.interval.ms` (7 s). Returns how many
/// records the source handed out by the time all four were applied.
async fn waits_in_place(idle: bool) -> u32 {
    let db = Pg::create().await;
    let topic = topic().await;
    let messages: Vec<_> = (0..4)
        .map(|i| {
            let script = Script {
                fail_first: if i == 0 { 2 } else { 0 },
                ..Script::default()
            };
            script.message(&format!("w-{i}"))
        })
        .collect();
    publish(&topic, &messages).await;
    let mut config = KafkaConfig::new(brokers(), format!("in-place-{topic}"), [topic.as_str()])
        .commit_interval(Duration::from_millis(100))
        .property("session.timeout.ms", "6000");
    config.max_poll_interval = Duration::from_secs(7);
    let delivered = Arc::new(AtomicU32::new(0));
    let source = Counted {
        inner: KafkaSource::connect(config).await.unwrap(),
        delivered: Arc::clone(&delivered),
        idle,
    };
    let ledger = Ledger::<Pg>::default();
    let ladder = Ladder::new([Duration::from_secs(1), Duration::from_secs(20)]);
    let processor = Processor::with_config(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        ledger.clone(),
        ProcessorConfig::default().ladder(ladder),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        Consumer::new(processor, ConsumerConfig::default())
            .run(source, async {
                let _ = stopped.await;
            })
            .await
    });
    let started = Instant::now();
    while db.scalar("SELECT count(*) FROM ledger").await < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "not applied in 90 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Whatever the group fetched again arrives soon after.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = stop.send(());
    running.await.unwrap().unwrap();
    assert_eq!(
        inboxed_test::conformance::ledger_state(&db).await,
        (4, 4),
        "every record applied once"
    );
    assert_eq!(ledger.calls(), 6, "the head ran three times, the rest once");
    db.finish().await;
    delivered.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_record_waiting_in_place_keeps_the_partition() {
    let delivered = waits_in_place(true).await;
    assert_eq!(
        delivered, 4,
        "no record fetched twice: the member kept its partition"
    );
}

#[tokio::test]
async fn without_idle_polling_the_member_leaves_the_group_while_a_record_waits() {
    let delivered = waits_in_place(false).await;
    println!("{delivered} records handed out for 4");
    assert!(
        delivered > 4,
        "the member left the group during the wait and fetched the records after the head again"
    );
}
