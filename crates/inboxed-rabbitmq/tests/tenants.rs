//! A database per tenant (`inboxed_core::Tenants`): one RabbitMQ queue carrying two tenants'
//! messages, a header naming the tenant, each tenant's processor on a database of its own, and
//! an operator's database for what names no tenant. Every message lands in its tenant's ledger
//! once and in no other; a message without the header, with one that is not text, or naming a
//! tenant with no database is dead-lettered in the operator's database, the header named.

use std::time::{Duration, Instant};

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString};
use lapin::{BasicProperties, Channel};

use inboxed_core::{ConsumerConfig, Tenants};
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::queue;
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::wire::ledger_processor as processor;
use inboxed_test::{Backend, Pg, credit};

const PER_TENANT: i64 = 500;

async fn publish(channel: &Channel, queue: &str, id: &str, tenant: Option<AMQPValue>) {
    let mut headers = FieldTable::default();
    if let Some(tenant) = tenant {
        headers.insert("tenant".into(), tenant);
    }
    let props = BasicProperties::default()
        .with_delivery_mode(2)
        .with_message_id(id.into())
        .with_headers(headers);
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            credit(id, 1).payload(),
            props,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn each_message_lands_in_its_tenants_database_and_nowhere_else() {
    let (a, b, ops) = (Pg::create().await, Pg::create().await, Pg::create().await);
    let (channel, name) = queue(&amqp_url()).await;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    for i in 0..PER_TENANT {
        for tenant in ["a", "b"] {
            let tag = AMQPValue::LongString(LongString::from(tenant));
            publish(&channel, &name, &format!("{tenant}-{i}"), Some(tag)).await;
        }
    }
    publish(&channel, &name, "none-1", None).await;
    let unknown = AMQPValue::LongString(LongString::from("c"));
    publish(&channel, &name, "unknown-1", Some(unknown)).await;
    let bytes = AMQPValue::ByteArray(ByteArray::from(vec![0xff, 0xfe, b'a']));
    publish(&channel, &name, "bytes-1", Some(bytes)).await;
    channel.wait_for_confirms().await.unwrap();

    let tenants = Tenants::new(
        "tenant",
        processor(&ops),
        ConsumerConfig::default().concurrency(8).batch_size(16),
    )
    .tenant("a", processor(&a))
    .tenant("b", processor(&b));
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), &name).prefetch(128))
        .await
        .unwrap();
    let settled = async {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let done = (
                a.scalar("SELECT count(*) FROM ledger").await,
                b.scalar("SELECT count(*) FROM ledger").await,
                ops.scalar("SELECT count(*) FROM inboxed_dead_letters")
                    .await,
            );
            if done == (PER_TENANT, PER_TENANT, 3) {
                break;
            }
            assert!(Instant::now() < deadline, "not settled: {done:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    tenants.run(source, settled).await.unwrap();

    for (db, tenant, other) in [(&a, "a", "b"), (&b, "b", "a")] {
        assert_eq!(
            db.scalar("SELECT count(DISTINCT message_id) FROM ledger")
                .await,
            PER_TENANT,
            "tenant {tenant}: each message once"
        );
        let strays: i64 =
            sqlx::query_scalar("SELECT count(*) FROM ledger WHERE message_id LIKE $1")
                .bind(format!("{other}-%"))
                .fetch_one(db.store.pool())
                .await
                .unwrap();
        assert_eq!(strays, 0, "tenant {tenant} holds none of tenant {other}'s");
        assert_eq!(
            db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
            0
        );
    }
    assert_eq!(ops.scalar("SELECT count(*) FROM ledger").await, 0);
    let reasons: Vec<String> =
        sqlx::query_scalar("SELECT error FROM inboxed_dead_letters ORDER BY error")
            .fetch_all(ops.store.pool())
            .await
            .unwrap();
    assert!(
        reasons[0].contains("header tenant is missing"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("header tenant is not UTF-8 text: \\xff\\xfea"),
        "{reasons:?}"
    );
    assert!(
        reasons[2].contains("header tenant names tenant \"c\", which has no database here"),
        "{reasons:?}"
    );
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    for db in [a, b, ops] {
        db.finish().await;
    }
}
