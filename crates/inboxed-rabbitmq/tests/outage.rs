//! A downstream service down for two minutes in the middle of a stream on a quorum queue, at
//! the library's defaults (`inboxed_test::outage`): the kill switch opens, the consumer holds at
//! most its prefetch unacknowledged, no attempt is charged meanwhile, and afterwards every
//! message is applied once; only the poison, which fails on its own, is dead-lettered.

use std::time::Duration;

use inboxed_core::KillSwitch;
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::outage::{downstream_outage, stream};
use inboxed_test::{Backend, Pg};

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
    let prefetch = u32::from(config.prefetch);
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
