//! One trace through three services A → B → C over a real SQS API (the local emulator), each
//! its own process with its own PostgreSQL database, inbox and outbox, exporting its spans
//! over OTLP to a receiver in the test.

use std::time::Duration;

use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName};

use inboxed_sqs::{SqsConfig, SqsPublisher, SqsPublisherConfig, SqsSource};
use inboxed_test::chain::{Service, run_traced, service_main};

use crate::sqs::client;

const TRACED: &str = "one_trace_runs_from_the_first_service_to_the_last";

fn attribute(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .unwrap()
}

/// Each message, started under a root span in the test, is one trace from A's processing to
/// C's, through both outboxes, relays and queues (a service writes on to the next queue by
/// name, and consumes its own by URL).
#[tokio::test]
async fn one_trace_runs_from_the_first_service_to_the_last() {
    if let Some(service) = Service::from_env() {
        let config = SqsConfig::new(&service.input).wait(Duration::from_secs(1));
        let source = SqsSource::with_client(client(), config)
            .await
            .expect("consume");
        let publisher = SqsPublisher::with_client(client(), SqsPublisherConfig::default())
            .await
            .expect("publish");
        service_main(&service, source, publisher).await;
        return;
    }
    let tag = uuid::Uuid::new_v4();
    let names = ["a", "b", "c"].map(|s| format!("inboxed-chain-{tag}-{s}"));
    let mut urls = Vec::new();
    for name in &names {
        let created = client()
            .create_queue()
            .queue_name(name)
            .attributes(QueueAttributeName::VisibilityTimeout, "5")
            .send()
            .await
            .expect("an SQS API must be running: scripts/test.sh starts one");
        urls.push(created.queue_url.unwrap());
    }
    let first = urls[0].clone();
    let tree = run_traced(
        &inboxed_test::test_name!(TRACED),
        [&urls[0], &urls[1], &urls[2]],
        [&names[1], &names[2]],
        |messages| async move {
            for message in messages {
                let mut send = client()
                    .send_message()
                    .queue_url(&first)
                    .message_body(String::from_utf8(message.payload().to_vec()).unwrap())
                    .message_attributes("message_id", attribute(message.id().as_str()));
                for (name, value) in message.headers().iter() {
                    let value = std::str::from_utf8(value).unwrap();
                    send = send.message_attributes(name, attribute(value));
                }
                send.send().await.unwrap();
            }
        },
    )
    .await;
    eprintln!("one trace through Amazon SQS:\n{tree}");
    for url in &urls {
        client().delete_queue().queue_url(url).send().await.unwrap();
    }
}
