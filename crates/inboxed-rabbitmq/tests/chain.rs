//! Three services A → B → C through a real RabbitMQ, each its own process with its own
//! PostgreSQL database, inbox and outbox, SIGKILLed at random and restarted for several
//! seconds: every service applies every message once, and nothing is left unsent.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use lapin::options::QueueDeleteOptions;

use inboxed_rabbitmq::{RabbitConfig, RabbitPublisher, RabbitPublisherConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::amqp::{declare, publish_keyed, queue};
use inboxed_test::chain::{Chain, Service, run_traced, service_main};
use inboxed_test::restart::amount;

const TEST: &str = "a_chain_of_three_services_is_exactly_once_under_random_sigkills";
const TRACED: &str = "one_trace_runs_from_the_first_service_to_the_last";
const MESSAGES: i64 = 300;

/// A service of the chain, when this process is one.
async fn serve(service: &Service) {
    let source =
        RabbitSource::connect(RabbitConfig::new(amqp_url(), service.input.as_str()).prefetch(16))
            .await
            .expect("consume");
    let publisher = RabbitPublisher::lazy(RabbitPublisherConfig::new(amqp_url()));
    service_main(service, source, publisher).await;
}

/// A channel and three fresh queues, A's first.
async fn queues() -> (lapin::Channel, [String; 3]) {
    let (channel, a) = queue(&amqp_url()).await;
    let (b, c) = (format!("{a}-b"), format!("{a}-c"));
    declare(&channel, &b).await;
    declare(&channel, &c).await;
    (channel, [a, b, c])
}

async fn delete(channel: &lapin::Channel, queues: [&String; 3]) {
    for q in queues {
        channel
            .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_chain_of_three_services_is_exactly_once_under_random_sigkills() {
    if let Some(service) = Service::from_env() {
        serve(&service).await;
        return;
    }
    let (channel, [a, b, c]) = queues().await;
    publish_keyed(&channel, &a, "m", 0..MESSAGES).await;
    let chain = Chain::create().await;
    let report = chain
        .run(
            &inboxed_test::test_name!(TEST),
            [&a, &b, &c],
            &[],
            MESSAGES,
            Duration::from_secs(8),
        )
        .await;
    eprintln!("chain through RabbitMQ: {report:?}");
    assert!(report.kills >= 8, "{report:?}");
    chain
        .assert_exact(MESSAGES, (0..MESSAGES).map(amount).sum())
        .await;
    delete(&channel, [&a, &b, &c]).await;
    chain.finish().await;
}

/// Three services, each its own process exporting its spans over OTLP to a receiver in this
/// test: each message, started under a root span here, is one trace from A's processing to
/// C's, through both outboxes, relays and queues.
#[tokio::test]
async fn one_trace_runs_from_the_first_service_to_the_last() {
    if let Some(service) = Service::from_env() {
        serve(&service).await;
        return;
    }
    let (channel, [a, b, c]) = queues().await;
    let tree = run_traced(
        &inboxed_test::test_name!(TRACED),
        [&a, &b, &c],
        [&b, &c],
        |messages| inboxed_test::amqp::publish_all(&channel, &a, messages),
    )
    .await;
    eprintln!("one trace through RabbitMQ:\n{tree}");
    delete(&channel, [&a, &b, &c]).await;
}
