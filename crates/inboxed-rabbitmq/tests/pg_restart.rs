//! PostgreSQL crashed (`pg_ctl stop -m immediate`) and restarted in the middle of 10,000
//! messages on a RabbitMQ queue: transactions cut by the crash roll back, their deliveries are
//! requeued, the pool reconnects, and a ledger audit finds every message applied exactly once.
//! The database is a throwaway cluster of the test's own.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};

use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::credit;
use inboxed_test::restart::{MESSAGES, amount, audit_through_pg_crash, store_on};
use inboxed_test::throwaway::ThrowawayPg;

fn amqp_url() -> String {
    std::env::var("INBOXED_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

#[tokio::test]
async fn postgres_crashed_and_restarted_mid_stream_loses_and_repeats_nothing() {
    let pg = ThrowawayPg::start();
    let store = store_on(&pg).await;
    let conn = Connection::connect(&amqp_url(), ConnectionProperties::default())
        .await
        .unwrap();
    let channel = conn.create_channel().await.unwrap();
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let name = format!("inboxed-test-{}", uuid::Uuid::new_v4());
    channel
        .queue_declare(
            name.as_str().into(),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut confirms = Vec::new();
    for i in 0..MESSAGES {
        let id = format!("p-{i}");
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(id.as_str().into());
        let body = credit(&id, amount(i)).payload().to_vec();
        confirms.push(
            channel
                .basic_publish(
                    "".into(),
                    name.as_str().into(),
                    BasicPublishOptions::default(),
                    &body,
                    props,
                )
                .await
                .unwrap(),
        );
    }
    for confirm in confirms {
        confirm.await.unwrap();
    }
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), &name).prefetch(64))
        .await
        .unwrap();
    let before = audit_through_pg_crash(&pg, store, source).await;
    eprintln!("pg restart over RabbitMQ: {before} rows committed before the crash");
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}
