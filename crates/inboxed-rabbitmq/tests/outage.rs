//! A downstream service down for two minutes in the middle of a stream on a quorum queue, at
//! the library's defaults (`inboxed_test::outage`): the kill switch opens, the consumer holds at
//! most its prefetch unacknowledged, no attempt is charged meanwhile, and afterwards every
//! message is applied once; only the poison, which fails on its own, is dead-lettered. And a
//! consumer SIGKILLed during an outage loses no delay and no message.

use std::time::{Duration, Instant};

use inboxed_core::KillSwitch;
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::broker_child::{
    broker_child_locator, broker_child_main, spawn_broker_child, watch_then_kill,
};
use inboxed_test::conformance::ledger_state;
use inboxed_test::handler::Script;
use inboxed_test::outage::{POISON, clean_stream, downstream_outage, stream};
use inboxed_test::{Backend, Pg};
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;

/// Few enough that, without the switch, each message left when the outage begins would fail
/// its five attempts in it (a backlog that cycles slowly hides the harm: with 1,000 messages
/// each failed about once in two minutes).
const MESSAGES: i64 = 120;

/// The queue's unacknowledged deliveries, as the broker reports them.
async fn unacked(queue: &str) -> u32 {
    let out = tokio::process::Command::new("rabbitmqctl")
        .args(["list_queues", "name", "messages_unacknowledged", "--quiet"])
        .output()
        .await
        .expect("rabbitmqctl runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(name, _)| *name == queue)
        .and_then(|(_, n)| n.trim().parse().ok())
        .expect("the queue's unacknowledged count")
}

#[tokio::test]
async fn a_two_minute_downstream_outage_dead_letters_nothing() {
    let db = Pg::create().await;
    let (channel, name) = inboxed_test::amqp::queue_of_kind(&amqp_url(), true).await;
    inboxed_test::amqp::publish_all(&channel, &name, stream(MESSAGES)).await;
    let config = RabbitConfig::new(amqp_url(), name.as_str());
    let prefetch = u32::try_from(config.prefetch).expect("a small prefetch");
    let src = RabbitSource::connect(config).await.unwrap();
    let outage = downstream_outage(
        &db,
        src,
        MESSAGES,
        Duration::from_secs(120),
        KillSwitch::new(),
        || unacked(&name),
    )
    .await;
    outage
        .assert_consumer_came_through(&db, MESSAGES, prefetch)
        .await;
    db.finish().await;
}

/// What the switch is for: a shorter stream without it, and an outage of only 20 s,
/// dead-letters messages that would have been applied once the downstream came back.
#[tokio::test]
async fn without_the_kill_switch_a_short_outage_dead_letters_the_stream() {
    let db = Pg::create().await;
    let (channel, name) = inboxed_test::amqp::queue_of_kind(&amqp_url(), true).await;
    inboxed_test::amqp::publish_all(&channel, &name, stream(60)).await;
    let src = RabbitSource::connect(RabbitConfig::new(amqp_url(), name.as_str()))
        .await
        .unwrap();
    downstream_outage(
        &db,
        src,
        60,
        Duration::from_secs(20),
        KillSwitch::off(),
        || async { 0 },
    )
    .await;
    let dead = db
        .scalar("SELECT count(*) FROM inboxed_dead_letters WHERE message_id <> 'o-poison'")
        .await;
    println!("{dead} valid messages dead-lettered without the switch");
    assert!(
        dead > 0,
        "the outage used up the attempts of valid messages"
    );
    db.finish().await;
}

/// A consumer SIGKILLed in an outage loses no delay and no message. A first consumer parks the
/// poison's third attempt in the 10 s delay queue and is killed; a second one, its downstream
/// down, opens its kill switch (its row in `kill_switches` says so) with deliveries held, and is
/// killed too; a third, the downstream back, applies every message once, and the poison's copy
/// comes back from the delay queue to run its third attempt. Nothing is dead-lettered, and no
/// valid message is charged more than the kill itself can charge.
#[tokio::test]
async fn a_consumer_killed_in_an_outage_loses_no_delay_and_no_message() {
    let test =
        &inboxed_test::test_name!("a_consumer_killed_in_an_outage_loses_no_delay_and_no_message");
    if let Some(locator) = broker_child_locator() {
        let name = std::env::var("INBOXED_RABBIT_QUEUE").unwrap();
        let src = RabbitSource::connect(RabbitConfig::new(amqp_url(), name))
            .await
            .unwrap();
        return broker_child_main::<Pg, _>(&locator, src).await;
    }
    let db = Pg::create().await;
    let (channel, name) = inboxed_test::amqp::queue_of_kind(&amqp_url(), true).await;
    let at_defaults = [
        ("INBOXED_RABBIT_QUEUE", name.as_str()),
        ("INBOXED_CONSUMER_CONCURRENCY", "8"),
    ];

    // The poison fails on its own: 1 s after its first attempt (held in process), then 10 s
    // after its second, parked in the broker. Killed once the second requeue is done.
    let poison = Script {
        fail: Some("transient".into()),
        ..Script::default()
    };
    inboxed_test::amqp::publish_all(&channel, &name, [poison.message(POISON)]).await;
    let mut child = spawn_broker_child(test, &db.locator, &at_defaults);
    let said = watch_then_kill(&mut child, Duration::from_secs(30), |s| {
        s.iter().filter(|(what, _)| what == "requeued").count() >= 2
    })
    .await;
    assert_eq!(said.len(), 2, "{said:?}");
    let parked = format!("{name}.delay.10s");
    assert_eq!(
        ready(&channel, &parked).await,
        1,
        "the third attempt waits in {parked}"
    );

    // The downstream down: the switch opens, deliveries are held; killed 2 s after its row
    // appeared.
    inboxed_test::amqp::publish_all(&channel, &name, clean_stream(MESSAGES_KILLED)).await;
    let mut down = at_defaults.to_vec();
    down.push(("INBOXED_DOWNSTREAM_DOWN", "1"));
    let mut child = spawn_broker_child(test, &db.locator, &down);
    let deadline = Instant::now() + Duration::from_secs(60);
    while db
        .scalar("SELECT count(*) FROM inboxed_kill_switches")
        .await
        == 0
    {
        assert!(
            Instant::now() < deadline,
            "the child's kill switch never opened"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    child.kill().await.expect("SIGKILL the child");
    let _ = child.wait().await;
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 0);

    // The downstream back: everything applied, the poison's copy back from the broker.
    let mut child = spawn_broker_child(test, &db.locator, &at_defaults);
    let poison_runs = "SELECT CAST(coalesce(max(attempts), 0) AS BIGINT) FROM inboxed_attempts \
                       WHERE message_id = 'o-poison'";
    let deadline = Instant::now() + Duration::from_secs(90);
    while db.scalar("SELECT count(*) FROM ledger").await < MESSAGES_KILLED
        || db.scalar(poison_runs).await < 2
    {
        assert!(
            Instant::now() < deadline,
            "not drained: {} applied, the poison counted {} redeliveries",
            db.scalar("SELECT count(*) FROM ledger").await,
            db.scalar(poison_runs).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    child.kill().await.expect("SIGKILL the child");
    let _ = child.wait().await;
    assert_eq!(
        ledger_state(&db).await,
        (MESSAGES_KILLED, MESSAGES_KILLED),
        "every message applied once"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
        0,
        "nothing dead-lettered"
    );
    let charged = db
        .scalar(
            "SELECT CAST(coalesce(max(attempts - forgiven), 0) AS BIGINT) FROM inboxed_attempts \
             WHERE message_id <> 'o-poison'",
        )
        .await;
    assert!(charged <= 2, "a valid message charged {charged} attempts");
    for queue in [
        format!("{name}.delay.10s"),
        format!("{name}.delay.1m"),
        name,
    ] {
        let _ = channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    db.finish().await;
}

/// The stream of the SIGKILL case: enough distinct messages to open the switch, few enough to
/// drain in seconds.
const MESSAGES_KILLED: i64 = 30;

/// Messages ready in `queue` (0 when it does not exist).
async fn ready(channel: &lapin::Channel, queue: &str) -> u32 {
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    match channel
        .clone()
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await
    {
        Ok(q) => q.message_count(),
        Err(_) => 0,
    }
}
