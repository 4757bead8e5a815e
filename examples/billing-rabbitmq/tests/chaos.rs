//! The billing service as a process, under the test kit's storm: `billing-rabbitmq consume`
//! killed with SIGKILL at random points and restarted while charges arrive through RabbitMQ,
//! a quarter of them published twice; the ledger of charges must show each charge once, and
//! the balance must be what one application of each leaves.

use std::process::Stdio;
use std::time::Duration;

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tokio::process::Command;

use inboxed_testkit::{Chaos, ChaosConfig};

#[path = "../src/test_db.rs"]
mod test_db;

fn amqp_url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// A charge of one cent to alice under `id`, persistent, confirmed by the broker.
async fn publish(channel: &Channel, queue: &str, id: &str) -> Result<(), lapin::Error> {
    let props = BasicProperties::default()
        .with_delivery_mode(2)
        .with_message_id(id.into());
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            br#"{"account": "alice", "cents": 1}"#,
            props,
        )
        .await?
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_killed_at_random_points_applies_every_charge_once() {
    let (store, url) = test_db::database().await;
    let queue = format!("billing-chaos-{}", uuid::Uuid::new_v4().simple());
    let conn = Connection::connect(&amqp_url(), ConnectionProperties::default())
        .await
        .expect("RabbitMQ");
    let channel = conn.create_channel().await.expect("a channel");
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await
        .expect("the queue");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("publisher confirms");

    let name = queue.clone();
    let chaos = Chaos::new(move || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_billing-rabbitmq"));
        command
            .arg("consume")
            .env("DATABASE_URL", &url)
            .env("AMQP_URL", amqp_url())
            .env("BILLING_QUEUE", &name)
            // More attempts than the storm has kills (at most 4 s / 200 ms = 20), each kill
            // charged twice at most (a charge published twice, both copies in flight): a charge
            // alone in its process at a kill is charged for it (the library cannot tell a
            // random SIGKILL from a crash of its own making), and under load a kill often lands
            // right after a restart's first effect, where the same charges run again. At the
            // default of 5, a CI run under load dead-lettered one charge after 7 kills. This
            // storm checks that each charge takes effect once, not what a crash costs.
            .env("BILLING_MAX_ATTEMPTS", "50")
            .stdout(Stdio::null());
        command
    });
    let mut config = ChaosConfig::default();
    config.messages = 100;
    config.storm = Duration::from_secs(4);
    config.run_between_kills = (Duration::from_millis(200), Duration::from_millis(700));
    config.quiet = Duration::from_secs(1);
    let (publisher, to, pool) = (channel.clone(), queue.clone(), store.pool().clone());
    let report = chaos
        .with_config(config)
        // A charge without an effect is reported dead-lettered, with its reason, if it is.
        .with_dead_letters_of(
            store.clone(),
            &inboxed::ConsumerName::new("billing").unwrap(),
        )
        .run(
            move |id: String, _n: u64| {
                let (channel, queue) = (publisher.clone(), to.clone());
                async move { publish(&channel, &queue, &id).await }
            },
            move || {
                let pool = pool.clone();
                async move {
                    sqlx::query_as::<_, (String, i64)>(
                        "SELECT message_id, count(*) FROM charges GROUP BY message_id",
                    )
                    .fetch_all(&pool)
                    .await
                }
            },
        )
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
    println!("{report}");
    assert!(report.kills >= 3, "{report}");

    let alice: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = 'alice'")
        .fetch_one(store.pool())
        .await
        .expect("alice's balance");
    assert_eq!(alice, 10_000 - 100, "each charge applied once: {report}");

    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .expect("delete the queue");
    test_db::finish(store).await;
}
