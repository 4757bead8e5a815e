//! A downstream service down for two minutes in the middle of a stream on SQS, at the
//! library's defaults (`inboxed_test::outage`; a queue at SQS's default visibility timeout of
//! 30 s): the kill switch opens, the messages in flight stay bounded, no attempt is charged
//! meanwhile (a message held past its visibility comes again, which charges nothing either),
//! and afterwards every message is applied once; only the poison, which fails on its own, is
//! dead-lettered.

use std::time::Duration;

use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName};

use inboxed_core::KillSwitch;
use inboxed_sqs::{SqsConfig, SqsSource};
use inboxed_test::outage::{downstream_outage, stream};
use inboxed_test::{Backend, Pg};

use crate::sqs::client;

/// As on RabbitMQ: few enough that each message left would fail its attempts in the outage.
const MESSAGES: i64 = 120;

#[tokio::test]
async fn a_two_minute_downstream_outage_dead_letters_nothing() {
    let db = Pg::create().await;
    let sqs = client();
    let url = sqs
        .create_queue()
        .queue_name(format!("inboxed-outage-{}", uuid::Uuid::new_v4()))
        .send()
        .await
        .expect("an SQS API must be running: scripts/test.sh starts one")
        .queue_url
        .unwrap();
    for message in stream(MESSAGES) {
        let id = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(message.id().as_str())
            .build()
            .unwrap();
        sqs.send_message()
            .queue_url(&url)
            .message_body(String::from_utf8(message.payload().to_vec()).unwrap())
            .message_attributes("message_id", id)
            .send()
            .await
            .unwrap();
    }
    let config = SqsConfig::new(&url);
    // One receive held while the switch is open, and what was requeued before it opened.
    let bound = u32::try_from(config.prefetch * 2).unwrap();
    let src = SqsSource::with_client(client(), config).await.unwrap();
    let in_flight = || {
        let (sqs, url) = (sqs.clone(), url.clone());
        async move {
            let attributes = sqs
                .get_queue_attributes()
                .queue_url(&url)
                .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                .send()
                .await
                .unwrap()
                .attributes
                .unwrap();
            attributes[&QueueAttributeName::ApproximateNumberOfMessagesNotVisible]
                .parse()
                .unwrap()
        }
    };
    let outage = downstream_outage(
        &db,
        src,
        MESSAGES,
        Duration::from_secs(120),
        KillSwitch::new(),
        in_flight,
    )
    .await;
    outage
        .assert_consumer_came_through(&db, MESSAGES, bound)
        .await;
    sqs.delete_queue().queue_url(&url).send().await.unwrap();
    db.finish().await;
}
