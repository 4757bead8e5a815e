//! The worker half of a relay + worker pair: `inboxed relay` stores RabbitMQ messages in the
//! inbox table, and this worker claims the rows (docs/inbox-contract.md is the same protocol
//! for any language) and records one shipment per order, exactly once.
//!
//! Run the pair with one command: `examples/relay-worker/run.sh`. By hand: `relay-worker
//! publish` publishes the orders; `inboxed relay --from $AMQP_URL --queue
//! inboxed-example-relay --to $DATABASE_URL --consumer shipping` relays them; `relay-worker
//! work` processes the rows and stops when every order has shipped.

use std::time::Duration;

use anyhow::{Context, bail};
use inboxed::inbox::{Worker, WorkerConfig};
use inboxed::postgres::PgStore;
use inboxed::{ConsumerName, Envelope, Handler, HandlerError, ResultExt};
use lapin::options::{BasicPublishOptions, QueueDeclareOptions, QueuePurgeOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use serde::Deserialize;
use sqlx::{PgConnection, PgPool, Postgres};

const QUEUE: &str = "inboxed-example-relay";
const ORDERS: i64 = 100;

#[derive(Deserialize)]
struct Order {
    order: i64,
}

/// Records the shipment in the same transaction that marks the row done.
struct Shipping;

impl Handler<Postgres> for Shipping {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        let order: Order = msg.json().permanent()?;
        sqlx::query("INSERT INTO shipments (order_id) VALUES ($1)")
            .bind(order.order)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("warn").init();
    let database_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@localhost:5432/postgres".to_owned());
    let pool = PgPool::connect(&database_url)
        .await
        .with_context(|| format!("cannot reach PostgreSQL at {database_url}"))?;
    match std::env::args().nth(1).as_deref() {
        Some("publish") => publish(&pool).await,
        Some("work") => work(pool).await,
        _ => bail!("usage: relay-worker publish|work"),
    }
}

/// Fresh tables and queue, then the orders, ten of them sent twice (producer retries). The
/// example forgets the previous run's rows so that it can send the same ids again; a real
/// service never deletes them early: done rows are the dedup memory.
async fn publish(pool: &PgPool) -> anyhow::Result<()> {
    let store = PgStore::new(pool.clone());
    store.migrate().await?;
    sqlx::raw_sql(
        "DROP TABLE IF EXISTS shipments;
         CREATE TABLE shipments (order_id bigint NOT NULL);
         DELETE FROM inboxed_inbox_messages WHERE consumer_name = 'shipping';",
    )
    .execute(pool)
    .await?;
    let amqp_url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let conn = Connection::connect(&amqp_url, ConnectionProperties::default())
        .await
        .with_context(|| format!("cannot reach RabbitMQ at {amqp_url}"))?;
    let channel = conn.create_channel().await?;
    channel
        .queue_declare(
            QUEUE.into(),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await?;
    channel
        .queue_purge(QUEUE.into(), QueuePurgeOptions::default())
        .await?;
    let orders = (1..=ORDERS).chain(1..=10);
    for order in orders {
        let body = serde_json::json!({ "order": order }).to_string();
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(format!("order-{order}").into());
        channel
            .basic_publish(
                "".into(),
                QUEUE.into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                props,
            )
            .await?
            .await?;
    }
    println!("published {} messages for {ORDERS} orders", ORDERS + 10);
    Ok(())
}

/// Processes the relayed rows until every order has shipped, then checks each shipped once.
async fn work(pool: PgPool) -> anyhow::Result<()> {
    let worker = Worker::new(
        PgStore::new(pool.clone()),
        ConsumerName::new("shipping")?,
        Shipping,
        WorkerConfig::default(),
    );
    for _ in 0..600 {
        worker.run_once().await?;
        let (rows, orders): (i64, i64) =
            sqlx::query_as("SELECT count(*), count(DISTINCT order_id) FROM shipments")
                .fetch_one(&pool)
                .await?;
        if orders == ORDERS {
            anyhow::ensure!(rows == ORDERS, "{rows} shipments for {ORDERS} orders");
            println!(
                "{ORDERS} orders shipped, each once, from {} messages",
                ORDERS + 10
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("not every order shipped within 60 s: is `inboxed relay` running?")
}
