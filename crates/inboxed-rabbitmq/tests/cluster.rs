//! A RabbitMQ cluster of three nodes (`inboxed_test::rabbit_node::Cluster`) losing the node that
//! leads its quorum queues in the middle of a stream. Every part connects through the cluster's
//! URL (all three nodes, the leader first): a processor on queue A, a relay storing queue B
//! into the inbox, two workers writing each row on through the outbox, and an outbox relay
//! publishing to queue C. A quarter of the way through, the leader is killed (SIGKILL): the
//! queues elect new leaders on the other two nodes, every part reconnects to the next node of
//! the URL, and the ledger holds every message of A and B exactly once; C receives every row
//! at least once, under one id each.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use lapin::options::{BasicGetOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties};

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor};
use inboxed_rabbitmq::{RabbitConfig, RabbitPublisher, RabbitPublisherConfig, RabbitSource};
use inboxed_test::amqp::publish_keyed;
use inboxed_test::pipeline::Parts;
use inboxed_test::rabbit_node::Cluster;
use inboxed_test::restart::{MESSAGES, amount, ledger_by_prefix, store_on};
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::{Ledger, Pg};

/// A channel on `url`, with quorum queues `names` declared (led by the node it is on: the
/// queues' leader is placed where they are declared).
async fn channel_with(url: &str, names: &[&str]) -> Channel {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = conn.create_channel().await.unwrap();
    for name in names {
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        channel
            .queue_declare((*name).into(), QueueDeclareOptions::durable(), args)
            .await
            .unwrap();
    }
    channel
}

#[tokio::test]
async fn a_cluster_losing_the_leader_of_its_quorum_queues_loses_and_doubles_nothing() {
    let cluster = Cluster::start(3).await;
    let pg = ThrowawayPg::start();
    let store = store_on(&pg).await;
    let lead = 0;
    let channel = channel_with(&cluster.nodes[lead].url(), &["a", "b", "c"]).await;
    for queue in ["a", "b", "c"] {
        assert_eq!(cluster.leader(queue), lead, "{queue} is led where declared");
    }
    publish_keyed(&channel, "a", "a", 0..MESSAGES).await;
    publish_keyed(&channel, "b", "b", 0..MESSAGES).await;
    let url = cluster.url_from(lead);

    let mut parts = Parts::default();
    let processor = Processor::new(
        store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let source = RabbitSource::connect(RabbitConfig::new(&url, "a"))
        .await
        .unwrap();
    let stopping = parts.stopping();
    parts.spawn(async move {
        Consumer::new(processor, ConsumerConfig::default())
            .run(source, stopping)
            .await
    });
    let source = RabbitSource::connect(RabbitConfig::new(&url, "b"))
        .await
        .unwrap();
    let publisher = RabbitPublisher::connect(RabbitPublisherConfig::new(&url))
        .await
        .unwrap();
    let stored = ConsumerName::new("stored").unwrap();
    parts.store_then_process(&store, &stored, source, 2, "c", publisher);

    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let (a, b) = ledger_by_prefix(&store, "a", "b").await;
        if a + b >= MESSAGES / 2 {
            break;
        }
        assert!(Instant::now() < deadline, "no progress before the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = ledger_by_prefix(&store, "a", "b").await;
    cluster.nodes[lead].kill().await;
    let killed = Instant::now();
    let sent = "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sent'";
    loop {
        let now = ledger_by_prefix(&store, "a", "b").await;
        let out: i64 = sqlx::query_scalar(sent)
            .fetch_one(store.pool())
            .await
            .unwrap();
        if now == (MESSAGES, MESSAGES) && out == MESSAGES {
            break;
        }
        if Instant::now() >= deadline {
            let states: Vec<(String, i64, Option<i32>, Option<String>)> = sqlx::query_as(
                "SELECT status, count(*), max(attempts), max(last_error) \
                 FROM inboxed_outbox_messages GROUP BY status",
            )
            .fetch_all(store.pool())
            .await
            .unwrap();
            let queues = cluster.nodes[(lead + 1) % 3].ctl(
                "rabbitmqctl",
                &[
                    "list_queues",
                    "name",
                    "leader",
                    "members",
                    "online",
                    "messages",
                    "state",
                ],
            );
            let status =
                cluster.nodes[(lead + 1) % 3].ctl("rabbitmq-queues", &["quorum_status", "c"]);
            panic!(
                "stuck at {now:?} of {MESSAGES} each, {out} outbox rows sent, after the leader \
                 died; outbox rows by status: {states:?}; queues: {queues}; c: {status}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let whole = killed.elapsed();
    // Redeliveries of what was acked on the dead node settle as duplicates meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    parts.stop().await;

    let (rows, distinct, sum): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT message_id), sum(amount)::bigint FROM ledger",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(
        (rows, distinct, sum),
        (
            2 * MESSAGES,
            2 * MESSAGES,
            2 * (0..MESSAGES).map(amount).sum::<i64>()
        ),
        "ledger audit"
    );
    let survivor = channel_with(&cluster.nodes[(lead + 1) % 3].url(), &[]).await;
    let (mut received, mut ids) = (0_i64, HashSet::new());
    while let Some(message) = survivor
        .basic_get("c".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        received += 1;
        ids.insert(
            message
                .delivery
                .properties
                .message_id()
                .clone()
                .unwrap()
                .to_string(),
        );
    }
    eprintln!(
        "a three-node cluster lost the leader of its queues at {before:?} of {MESSAGES} each: \
         the rest in {whole:?}; queue c received {received} messages for {} ids (leaders now \
         on nodes {:?})",
        ids.len(),
        ["a", "b", "c"].map(|q| cluster.leader(q))
    );
    assert_eq!(
        ids.len(),
        usize::try_from(MESSAGES).unwrap(),
        "every row sent"
    );
    assert!(
        ["a", "b", "c"].iter().all(|q| cluster.leader(q) != lead),
        "the queues are led elsewhere"
    );
}
