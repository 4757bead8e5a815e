//! The relay's publish rate against raw confirmed publishing through the same client.

use std::time::{Duration, Instant};

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeleteOptions, QueuePurgeOptions,
};
use lapin::{BasicProperties, Connection, ConnectionProperties};

use inboxed_core::Store;
use inboxed_core::outbox::{
    Confirmation, Outbox, OutboxRelay, OutboxRelayConfig, OutboxRow, OutgoingMessage, Publisher,
};
use inboxed_core::store::BeginParams;
use inboxed_nats::{NatsPublisher, NatsPublisherConfig};
use inboxed_postgres::PgStore;
use inboxed_rabbitmq::{RabbitPublisher, RabbitPublisherConfig};

use super::{Args, UNSENT};

/// Relay against raw confirmed publishing, RabbitMQ then NATS, at each relay batch size.
pub(super) async fn publish_rates(store: &PgStore, args: &Args) -> anyhow::Result<()> {
    let conn = Connection::connect(&args.broker.amqp_url, ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let js = async_nats::jetstream::new(async_nats::connect(&args.nats_url).await?);
    let payload = vec![b'x'; args.payload];
    let modes = args.modes()?;
    // (broker, claim mode, relay batch size, relay msg/s, raw msg/s of the same round)
    let mut results: Vec<(&str, &str, u32, f64, f64)> = Vec::new();
    for round in 1..=args.rounds {
        let queue = crate::rabbitmq::fresh_queue(&channel, "inboxed-bench-outbox").await?;
        let raw = raw_rabbit(&channel, &queue, args.messages, &payload).await?;
        println!("round {round}, RabbitMQ: raw confirmed publish {raw:.0} msg/s");
        for &(mode, claim) in &modes {
            for &batch in &args.relay_batches {
                let publisher =
                    RabbitPublisher::connect(RabbitPublisherConfig::new(&args.broker.amqp_url))
                        .await?;
                let config = args.relay().claim_mode(claim).batch_size(batch);
                let rate =
                    relay_rate(store, publisher, config, &queue, args.messages, &payload).await?;
                channel
                    .queue_purge(queue.as_str().into(), QueuePurgeOptions::default())
                    .await?;
                println!(
                    "round {round}, RabbitMQ: relay, {mode}, batches of {batch}: {rate:.0} msg/s"
                );
                results.push(("RabbitMQ", mode, batch, rate, raw));
            }
        }
        channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await?;

        let tag = uuid::Uuid::now_v7().simple().to_string();
        let (stream, subject) = (format!("BENCH_OUTBOX_{tag}"), format!("bench.outbox.{tag}"));
        let config = async_nats::jetstream::stream::Config {
            name: stream.clone(),
            subjects: vec![subject.clone()],
            storage: async_nats::jetstream::stream::StorageType::File,
            ..Default::default()
        };
        js.create_stream(config.clone()).await?;
        let raw = raw_nats(&js, &subject, args.messages, &payload).await?;
        println!("round {round}, NATS JetStream: raw publish {raw:.0} msg/s");
        for &(mode, claim) in &modes {
            for &batch in &args.relay_batches {
                // A fresh stream: the same ids again would be dropped as duplicates.
                js.delete_stream(&stream).await?;
                js.create_stream(config.clone()).await?;
                let publisher =
                    NatsPublisher::connect(NatsPublisherConfig::new(&args.nats_url)).await?;
                let relay = args.relay().claim_mode(claim).batch_size(batch);
                let rate =
                    relay_rate(store, publisher, relay, &subject, args.messages, &payload).await?;
                println!(
                    "round {round}, NATS JetStream: relay, {mode}, batches of {batch}: {rate:.0} msg/s"
                );
                results.push(("NATS JetStream", mode, batch, rate, raw));
            }
        }
        js.delete_stream(&stream).await?;

        // The database's share alone: a publisher that confirms every row at once.
        for &(mode, claim) in &modes {
            for &batch in &args.relay_batches {
                let config = args.relay().claim_mode(claim).batch_size(batch);
                let rate = relay_rate(store, AtOnce, config, "bench.none", args.messages, &payload)
                    .await?;
                println!(
                    "round {round}, {NO_BROKER}: relay, {mode}, batches of {batch}: {rate:.0} msg/s"
                );
                results.push((NO_BROKER, mode, batch, rate, raw));
            }
        }
    }
    println!();
    println!(
        "| broker | claim | relay batch | relay msg/s | raw confirmed publish msg/s | relay / raw |"
    );
    println!("|---|---|---|---|---|---|");
    for broker in ["RabbitMQ", "NATS JetStream", NO_BROKER] {
        for &(mode, _) in &modes {
            for &batch in &args.relay_batches {
                let of = |f: fn(&(&str, &str, u32, f64, f64)) -> f64| {
                    crate::median(
                        results
                            .iter()
                            .filter(|r| r.0 == broker && r.1 == mode && r.2 == batch)
                            .map(f)
                            .collect(),
                    )
                };
                let default = if batch == OutboxRelayConfig::default().batch_size {
                    " (default)"
                } else {
                    ""
                };
                println!(
                    "| {broker} | {mode} | {batch}{default} | {:.0} | {:.0} | {:.2} |",
                    of(|r| r.3),
                    of(|r| r.4),
                    of(|r| r.3 / r.4)
                );
            }
        }
    }
    println!(
        "({NO_BROKER}: the relay with a publisher that confirms every row at once, against \
         NATS JetStream's raw rate of the same round: what the database leaves of the fastest \
         broker's rate, the ceiling of any relay ratio on this machine)"
    );
    println!();
    Ok(())
}

/// The row of the publish table that measures the database alone.
const NO_BROKER: &str = "no broker";

/// Confirms every row at once: a relay publishing through it runs at the rate its claims and
/// settlements allow.
struct AtOnce;

impl Publisher for AtOnce {
    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        rows.iter().map(|_| Confirmation::Confirmed).collect()
    }
}

/// `messages` persistent messages published to `queue` with publisher confirms and
/// `mandatory`, as the relay publishes them, every one in flight before the confirmations
/// are awaited; messages a second.
async fn raw_rabbit(
    channel: &lapin::Channel,
    queue: &str,
    messages: usize,
    payload: &[u8],
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut confirms = Vec::with_capacity(messages);
    for _ in 0..messages {
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(uuid::Uuid::now_v7().to_string().into());
        let options = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        confirms.push(
            channel
                .basic_publish("".into(), queue.into(), options, payload, props)
                .await?,
        );
    }
    for c in confirms {
        c.await?;
    }
    let rate = messages as f64 / started.elapsed().as_secs_f64();
    channel
        .queue_purge(queue.into(), QueuePurgeOptions::default())
        .await?;
    Ok(rate)
}

/// `messages` JetStream publishes to `subject`, each with its own `Nats-Msg-Id`, the
/// acknowledgements awaited 256 at a time (the client bounds those in flight); messages a
/// second.
async fn raw_nats(
    js: &async_nats::jetstream::Context,
    subject: &str,
    messages: usize,
    payload: &[u8],
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut acks = Vec::new();
    for _ in 0..messages {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", uuid::Uuid::now_v7().to_string().as_str());
        acks.push(
            js.publish_with_headers(subject.to_owned(), headers, payload.to_vec().into())
                .await?,
        );
        if acks.len() == 256 {
            for ack in acks.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in acks {
        ack.await?;
    }
    Ok(messages as f64 / started.elapsed().as_secs_f64())
}

/// Writes `messages` outbox rows to `destination` (500 a transaction, not timed), then times a
/// relay with its defaults until none is unsent.
async fn relay_rate<P: Publisher>(
    store: &PgStore,
    publisher: P,
    config: OutboxRelayConfig,
    destination: &str,
    messages: usize,
    payload: &[u8],
) -> anyhow::Result<f64> {
    let outbox = Outbox::new(store.clone());
    for chunk in 0..messages.div_ceil(500) {
        let n = (messages - chunk * 500).min(500);
        let mut tx = store.begin(&BeginParams::default()).await?;
        for _ in 0..n {
            outbox
                .write(
                    &mut tx,
                    &OutgoingMessage::new(destination, payload.to_vec()),
                )
                .await?;
        }
        tx.commit().await?;
    }
    let pool = store.pool().clone();
    let relay = OutboxRelay::new(store.clone(), publisher, config);
    let started = Instant::now();
    // The probe's failure stops the relay too, and is reported: it would time it forever.
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel();
    let done = async move {
        loop {
            match sqlx::query_scalar::<_, i64>(UNSENT).fetch_one(&pool).await {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => {
                    let _ = failed_tx.send(e);
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    relay.run(done).await?;
    if let Ok(e) = failed_rx.await {
        return Err(anyhow::Error::new(e).context("the probe of unsent rows"));
    }
    let rate = messages as f64 / started.elapsed().as_secs_f64();
    // The next measurement starts from an empty outbox, vacuumed.
    for sql in [
        "TRUNCATE inboxed_outbox_messages",
        "VACUUM ANALYZE inboxed_outbox_messages",
    ] {
        sqlx::raw_sql(sql).execute(store.pool()).await?;
    }
    Ok(rate)
}
