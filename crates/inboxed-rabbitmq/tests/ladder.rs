//! The default ladder on RabbitMQ, against the clock: a message failing transiently comes back
//! after 1 s (held in process), then 10 s and 1 min (parked in the delay queues, which live in
//! the broker), and the 1 min wait survives the consumer stopping and another starting.

use std::time::{Duration, Instant};

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor, ProcessorConfig};
use inboxed_rabbitmq::{QueueKind, RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::handler::Script;
use inboxed_test::{Backend, Ledger, Pg, TestDb};
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;

/// Messages ready in `queue` (0 when it does not exist yet).
async fn ready(conn: &lapin::Connection, queue: &str) -> u32 {
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    // A passive declare of a missing queue closes its channel (a clone of a channel is the
    // same channel: probing on the test's own closed it for good when the probe came before
    // the consumer's declare, and every later probe read 0). Each probe opens its own.
    let probe = conn.create_channel().await.expect("a channel to probe on");
    let count = match probe
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await
    {
        Ok(q) => q.message_count(),
        Err(_) => 0,
    };
    let _ = probe.close(200, "probed".into()).await;
    count
}

/// Runs a consumer of `queue` at the defaults until `stop` resolves.
fn consume(
    db: &TestDb<Pg>,
    ledger: &Ledger<Pg>,
    queue: &str,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let processor = Processor::with_config(
        db.store.clone(),
        ConsumerName::new("ledger").expect("valid name"),
        ledger.clone(),
        ProcessorConfig::default(),
    );
    let config = RabbitConfig::new(amqp_url(), queue).declare(QueueKind::Quorum);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let source = RabbitSource::connect(config).await.expect("connect");
        Consumer::new(processor, ConsumerConfig::default())
            .run(source, async {
                let _ = stopped.await;
            })
            .await
            .expect("consumer ran");
    });
    (stop, task)
}

/// When the handler was called for the `n`th time (polled every 20 ms), within `within`.
async fn call(ledger: &Ledger<Pg>, n: u32, within: Duration) -> Instant {
    let deadline = Instant::now() + within;
    while ledger.calls.load(std::sync::atomic::Ordering::SeqCst) < n {
        assert!(Instant::now() < deadline, "no call {n} within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Instant::now()
}

fn assert_between(what: &str, gap: Duration, low: f64, high: f64) {
    println!("{what}: {:.2} s", gap.as_secs_f64());
    assert!(
        gap.as_secs_f64() >= low && gap.as_secs_f64() <= high,
        "{what}: {gap:?} not within [{low}, {high}] s"
    );
}

#[tokio::test]
async fn the_default_ladder_waits_in_the_broker_and_survives_a_restart() {
    // A park that fails says why in a warning: shown with the failure.
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_test_writer()
        .try_init();
    let db = Pg::create().await;
    let (channel, name) = inboxed_test::amqp::queue_of_kind(&amqp_url(), true).await;
    let probes = lapin::Connection::connect(&amqp_url(), lapin::ConnectionProperties::default())
        .await
        .expect("connect to probe");
    let message = Script {
        fail_first: 3,
        ..Script::default()
    }
    .message("l-1");
    inboxed_test::amqp::publish_all(&channel, &name, [message]).await;
    let ledger = Ledger::<Pg>::default();
    let (stop, first) = consume(&db, &ledger, &name);

    let t1 = call(&ledger, 1, Duration::from_secs(10)).await;
    let t2 = call(&ledger, 2, Duration::from_secs(10)).await;
    // Step 1 (1 s and up to a quarter more) is shorter than the shortest delay queue: held in
    // process for `max_requeue_hold` (1 s).
    assert_between("after attempt 1", t2 - t1, 0.9, 2.5);
    let t3 = call(&ledger, 3, Duration::from_secs(30)).await;
    // Step 2: parked in the 10 s delay queue, rounded down to exactly its step.
    assert_between("after attempt 2", t3 - t2, 9.9, 13.0);

    // Step 3: parked in the 1 min queue, and nowhere else. Its minute runs from the park
    // (the queue's TTL starts as the copy is enqueued), which declaring that quorum queue can
    // put seconds after the failure on a loaded machine (more than 10 s once in a CI run).
    let parked = format!("{name}.delay.1m");
    let deadline = Instant::now() + Duration::from_secs(30);
    while ready(&probes, &parked).await == 0 {
        assert!(Instant::now() < deadline, "nothing parked in {parked}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let parked_at = Instant::now();
    let _ = stop.send(());
    first.await.expect("first consumer");
    assert_eq!(inboxed_test::amqp::depth(&channel, &name).await, 0);
    assert_eq!(
        db.scalar("SELECT CAST(max(attempts) AS BIGINT) FROM inboxed_attempts")
            .await,
        2,
        "the store counted the two redeliveries (the first delivery, the broker's count of 1, \
         writes nothing): three attempts"
    );

    // Another consumer: the message comes back when its minute is up, not before.
    let (stop, second) = consume(&db, &ledger, &name);
    let t4 = call(&ledger, 4, Duration::from_secs(90)).await;
    assert_between(
        "after the park, across a restart",
        t4 - parked_at,
        59.0,
        66.0,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.scalar("SELECT count(*) FROM ledger").await == 0 {
        assert!(
            Instant::now() < deadline,
            "the fourth attempt was not applied"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(());
    second.await.expect("second consumer");
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 1);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
        0
    );
    assert_eq!(ready(&probes, &parked).await, 0);
    assert_eq!(inboxed_test::amqp::depth(&channel, &name).await, 0);
    // The delay queues outlive their source otherwise.
    for queue in [format!("{name}.delay.10s"), parked, name] {
        channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await
            .expect("delete the queue");
    }
    db.finish().await;
}
