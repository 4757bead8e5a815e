//! A RabbitMQ → PostgreSQL billing consumer: each charge is applied to its account exactly
//! once, however often RabbitMQ delivers it.
//!
//! Run it (with RabbitMQ on localhost:5672 and PostgreSQL on localhost:5432, or `AMQP_URL` and
//! `DATABASE_URL` set):
//!
//! ```sh
//! cargo run -p billing-rabbitmq
//! ```
//!
//! It publishes five charges, one of them twice (a producer retry) and one more without a
//! message id, consumes them through the inbox and prints the balances: the retried charge is
//! applied once, and the message without an id is dead-lettered, not applied and not lost.
//!
//! `cargo run -p billing-rabbitmq -- consume` runs the consumer alone, as the service would run
//! in production: on `BILLING_QUEUE` (default `inboxed-example-billing`) until SIGINT or
//! SIGTERM, with `BILLING_MAX_ATTEMPTS` attempts a charge (default 5). `tests/chaos.rs` kills
//! that process at random points while charges arrive, and audits the ledger of charges.

use std::time::Duration;

use anyhow::Context;
use inboxed::postgres::PgStore;
use inboxed::rabbitmq::{RabbitConfig, RabbitSource};
use inboxed::{
    Consumer, ConsumerConfig, ConsumerName, Envelope, Handler, HandlerError, Processor,
    ProcessorConfig, ResultExt,
};
use lapin::options::{BasicPublishOptions, QueueDeclareOptions, QueuePurgeOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use serde::Deserialize;
use sqlx::{PgConnection, PgPool, Postgres};

#[cfg(test)]
mod kit_tests;
#[cfg(test)]
mod test_db;

const QUEUE: &str = "inboxed-example-billing";

#[derive(Deserialize)]
struct Charge {
    account: String,
    cents: i64,
}

/// The business change: runs inside the inbox's transaction, on its connection.
struct Billing;

impl Handler<Postgres> for Billing {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        // An undecodable body can never succeed: dead-letter it at once.
        let charge: Charge = msg.json().permanent()?;
        let updated = sqlx::query("UPDATE accounts SET balance = balance - $1 WHERE id = $2")
            .bind(charge.cents)
            .bind(&charge.account)
            .execute(&mut *conn)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(HandlerError::permanent(format!(
                "no account {:?}",
                charge.account
            )));
        }
        sqlx::query("INSERT INTO charges (message_id, account, cents) VALUES ($1, $2, $3)")
            .bind(msg.id().as_str())
            .bind(&charge.account)
            .bind(charge.cents)
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
    let amqp_url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let pool = PgPool::connect(&database_url)
        .await
        .with_context(|| format!("cannot reach PostgreSQL at {database_url}"))?;
    match std::env::args().nth(1).as_deref() {
        None => demo(pool, &amqp_url).await,
        Some("consume") => consume(pool, &amqp_url).await,
        Some(other) => {
            anyhow::bail!("unknown command {other:?}: run with no argument, or `consume`")
        }
    }
}

/// The consumer alone, until SIGINT or SIGTERM: the service as it runs in production.
async fn consume(pool: PgPool, amqp_url: &str) -> anyhow::Result<()> {
    let queue = std::env::var("BILLING_QUEUE").unwrap_or_else(|_| QUEUE.to_owned());
    sqlx::raw_sql(include_str!("schema.sql"))
        .execute(&pool)
        .await?;
    let store = PgStore::new(pool);
    store.migrate().await?;
    // A production knob as much as a test's: how many crashes and transient failures a charge
    // may take before it is dead-lettered (the library's default, 5, when unset).
    let mut config = ProcessorConfig::default();
    if let Ok(n) = std::env::var("BILLING_MAX_ATTEMPTS") {
        config = config.max_attempts(n.parse().context("BILLING_MAX_ATTEMPTS")?);
    }
    let processor = Processor::with_config(store, ConsumerName::new("billing")?, Billing, config);
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url, &queue)).await?;
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    Consumer::new(processor, ConsumerConfig::default())
        .run(source, shutdown)
        .await?;
    Ok(())
}

/// Publishes the demo's charges, consumes them, and prints the balances.
async fn demo(pool: PgPool, amqp_url: &str) -> anyhow::Result<()> {
    sqlx::raw_sql("DROP TABLE IF EXISTS accounts, charges")
        .execute(&pool)
        .await?;
    sqlx::raw_sql(include_str!("schema.sql"))
        .execute(&pool)
        .await?;
    sqlx::raw_sql("INSERT INTO accounts VALUES ('alice', 10000), ('bob', 10000)")
        .execute(&pool)
        .await?;
    let store = PgStore::new(pool.clone());
    store.migrate().await?;
    let invalid_before = invalid_letters(&pool).await?;

    // The producer side: five charges, charge-2 sent twice, and one message without an id.
    let conn = Connection::connect(amqp_url, ConnectionProperties::default())
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
    let run = std::process::id();
    let charges = [
        ("charge-1", "alice", 1_000),
        ("charge-2", "bob", 250),
        ("charge-2", "bob", 250),
        ("charge-3", "alice", 99),
        ("charge-4", "bob", 1),
        ("charge-5", "alice", 500),
    ];
    for (id, account, cents) in charges {
        let body = serde_json::json!({ "account": account, "cents": cents }).to_string();
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(format!("{run}-{id}").into());
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
    channel
        .basic_publish(
            "".into(),
            QUEUE.into(),
            BasicPublishOptions::default(),
            b"{}",
            BasicProperties::default(),
        )
        .await?
        .await?;

    // The consumer: acks each delivery only after its transaction committed.
    let consumer = ConsumerName::new("billing")?;
    let processor = Processor::new(store, consumer, Billing);
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url, QUEUE)).await?;
    let settled = settled_all(pool.clone(), run, invalid_before);
    Consumer::new(processor, ConsumerConfig::default())
        .run(source, settled)
        .await?;

    let balances: Vec<(String, i64)> =
        sqlx::query_as("SELECT id, balance FROM accounts ORDER BY id")
            .fetch_all(&pool)
            .await?;
    for (account, balance) in &balances {
        println!("{account}: {balance}");
    }
    let expected = [("alice".to_owned(), 8_401), ("bob".to_owned(), 9_749)];
    anyhow::ensure!(balances == expected, "balances differ from {expected:?}");
    println!(
        "charge-2 was delivered twice and applied once; the message without an id was dead-lettered"
    );
    Ok(())
}

/// Dead letters of messages that came without a usable id.
async fn invalid_letters(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "SELECT count(*) FROM inboxed_dead_letters
         WHERE consumer_name = 'billing' AND reason = 'invalid_message'",
    )
    .fetch_one(pool)
    .await
}

/// Resolves once this run's five charges are processed and its keyless message is
/// dead-lettered: the example's shutdown signal.
async fn settled_all(pool: PgPool, run: u32, invalid_before: i64) {
    let pattern = format!("{run}-charge-%");
    loop {
        let invalid = invalid_letters(&pool).await.unwrap_or(0);
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM inboxed_processed_messages p
             JOIN inboxed_consumers c ON c.id = p.consumer_id
             WHERE c.name = 'billing' AND inboxed_message_id(p.message_key) LIKE $1",
        )
        .bind(&pattern)
        .fetch_one(&pool)
        .await
        .unwrap_or(0);
        if done == 5 && invalid > invalid_before {
            // Give the consumer loop a moment to ack the last deliveries; it drains in-flight
            // work before returning in any case.
            tokio::time::sleep(Duration::from_millis(200)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
