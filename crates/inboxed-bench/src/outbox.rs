//! `inboxed-bench outbox`: the transactional outbox against what it adds to. In interleaved
//! rounds of one run:
//! - the relay's publish rate (its defaults) against raw confirmed publishing of the same
//!   messages through the same client library (lapin, async-nats), every message in flight
//!   before the confirmations are awaited;
//! - a handler that writes one outbox row beside its business update against the same handler
//!   without it, one message per transaction and in batches;
//! - commit-to-confirm latency: one outbox row a transaction at a steady rate, a relay with its
//!   defaults (woken by NOTIFY) publishing them, `sent_at - created_at` of each row.

use std::time::{Duration, Instant};

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
    QueuePurgeOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use sqlx::{PgConnection, Postgres};

use inboxed_core::outbox::{Outbox, OutboxRelay, OutboxRelayConfig, OutgoingMessage, Publisher};
use inboxed_core::store::BeginParams;
use inboxed_core::{
    ConsumerName, Envelope, Handler, HandlerError, MessageId, Outcome, Processor, Store,
};
use inboxed_nats::{NatsPublisher, NatsPublisherConfig};
use inboxed_postgres::PgStore;
use inboxed_rabbitmq::{RabbitPublisher, RabbitPublisherConfig};

use crate::rabbitmq::Broker;
use crate::variants::{Credit, bench_store};

/// The outbox's relay, its write in a handler, and its latency, each against its baseline.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    broker: Broker,
    /// NATS server for the JetStream half of the publish comparison.
    #[arg(
        long,
        env = "INBOXED_NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    nats_url: String,
    /// Messages per publish measurement.
    #[arg(long, default_value_t = 20_000)]
    messages: usize,
    /// Payload bytes of each message.
    #[arg(long, default_value_t = 256)]
    payload: usize,
    /// Concurrent workers of the handler measurement (and pool size).
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Messages per batch of the batched handler measurement.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Seconds per handler variant per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Outbox rows a second written for the latency measurement.
    #[arg(long, default_value_t = 1_000)]
    rate: u32,
    /// Seconds the latency measurement writes for.
    #[arg(long, default_value_t = 10.0)]
    latency_seconds: f64,
    /// Rounds; each measures every variant once, in rotating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Relay batch sizes to measure (comma-separated); the relay's other settings are its
    /// defaults.
    #[arg(long, value_delimiter = ',', default_value = "100,500,1000")]
    relay_batches: Vec<u32>,
    /// The relay's claim loops (default: the relay's own default).
    #[arg(long)]
    relay_concurrency: Option<usize>,
    /// The relay keeps no sent rows (`sent_retention` zero): it deletes each confirmed row in
    /// place of marking it sent.
    #[arg(long)]
    delete_sent: bool,
    /// Only these parts (comma-separated): publish, handler, latency. Default: all three.
    #[arg(long, value_delimiter = ',', default_value = "publish,handler,latency")]
    only: Vec<String>,
    /// The relay's batch size in the latency measurement (default: the relay's default).
    #[arg(long)]
    latency_batch: Option<u32>,
}

impl Args {
    /// The relay's config: its defaults, or the loops asked for.
    fn relay(&self) -> OutboxRelayConfig {
        let mut c = OutboxRelayConfig::default();
        if let Some(n) = self.relay_concurrency {
            c = c.concurrency(n);
        }
        if self.delete_sent {
            c = c.sent_retention(Some(Duration::ZERO));
        }
        c
    }
}

const ACCOUNTS: i64 = 100_000;
const UNSENT: &str =
    "SELECT count(*) FROM inboxed_outbox_messages WHERE status IN ('pending', 'sending')";

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let store = bench_store(server, args.workers.max(8) + 4, ACCOUNTS).await?;
    println!(
        "{} messages of {} bytes per publish measurement, {} workers and batches of {} for the \
         handler, {} rows/s for {} s for the latency, {} rounds",
        args.messages,
        args.payload,
        args.workers,
        args.batch,
        args.rate,
        args.latency_seconds,
        args.rounds
    );
    let part = |name: &str| args.only.iter().any(|p| p == name);
    if part("publish") {
        publish_rates(&store, &args).await?;
    }
    if part("handler") {
        tidy(&store).await?;
        handler_cost(&store, &args).await?;
    }
    if part("latency") {
        tidy(&store).await?;
        latency(&store, &args).await?;
    }
    Ok(())
}

/// Vacuums and analyzes the database and writes a checkpoint: what autovacuum (off on the
/// benchmark machine) and the checkpointer would have done between the measurements, so that
/// one part does not pay for the dead rows and the WAL of the one before.
async fn tidy(store: &PgStore) -> anyhow::Result<()> {
    // One statement each: several in one string run as one transaction, which VACUUM refuses.
    for sql in ["VACUUM ANALYZE", "CHECKPOINT"] {
        sqlx::raw_sql(sql).execute(store.pool()).await?;
    }
    Ok(())
}

/// Relay against raw confirmed publishing, RabbitMQ then NATS, at each relay batch size.
async fn publish_rates(store: &PgStore, args: &Args) -> anyhow::Result<()> {
    let conn = Connection::connect(&args.broker.amqp_url, ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let js = async_nats::jetstream::new(async_nats::connect(&args.nats_url).await?);
    let payload = vec![b'x'; args.payload];
    // (broker, relay batch size, relay msg/s, raw msg/s of the same round)
    let mut results: Vec<(&str, u32, f64, f64)> = Vec::new();
    for round in 1..=args.rounds {
        let queue = format!("inboxed-bench-outbox-{}", uuid::Uuid::now_v7());
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions::durable(),
                FieldTable::default(),
            )
            .await?;
        let raw = raw_rabbit(&channel, &queue, args.messages, &payload).await?;
        println!("round {round}, RabbitMQ: raw confirmed publish {raw:.0} msg/s");
        for &batch in &args.relay_batches {
            let publisher =
                RabbitPublisher::connect(RabbitPublisherConfig::new(&args.broker.amqp_url)).await?;
            let config = args.relay().batch_size(batch);
            let rate =
                relay_rate(store, publisher, config, &queue, args.messages, &payload).await?;
            channel
                .queue_purge(queue.as_str().into(), QueuePurgeOptions::default())
                .await?;
            println!("round {round}, RabbitMQ: relay, batches of {batch}: {rate:.0} msg/s");
            results.push(("RabbitMQ", batch, rate, raw));
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
        for &batch in &args.relay_batches {
            // A fresh stream: the same ids again would be dropped as duplicates.
            js.delete_stream(&stream).await?;
            js.create_stream(config.clone()).await?;
            let publisher =
                NatsPublisher::connect(NatsPublisherConfig::new(&args.nats_url)).await?;
            let relay = args.relay().batch_size(batch);
            let rate =
                relay_rate(store, publisher, relay, &subject, args.messages, &payload).await?;
            println!("round {round}, NATS JetStream: relay, batches of {batch}: {rate:.0} msg/s");
            results.push(("NATS JetStream", batch, rate, raw));
        }
        js.delete_stream(&stream).await?;
    }
    println!();
    println!("| broker | relay batch | relay msg/s | raw confirmed publish msg/s | relay / raw |");
    println!("|---|---|---|---|---|");
    for broker in ["RabbitMQ", "NATS JetStream"] {
        for &batch in &args.relay_batches {
            let of = |f: fn(&(&str, u32, f64, f64)) -> f64| {
                crate::median(
                    results
                        .iter()
                        .filter(|r| r.0 == broker && r.1 == batch)
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
                "| {broker} | {batch}{default} | {:.0} | {:.0} | {:.2} |",
                of(|r| r.2),
                of(|r| r.3),
                of(|r| r.2 / r.3)
            );
        }
    }
    println!();
    Ok(())
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
    let done = async move {
        loop {
            let unsent: i64 = sqlx::query_scalar(UNSENT)
                .fetch_one(&pool)
                .await
                .unwrap_or(1);
            if unsent == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    relay.run(done).await?;
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

/// [`Credit`] plus one outbox row per message, in the same transaction.
struct CreditAndNotify {
    credit: Credit,
    outbox: Outbox<PgStore>,
}

impl Handler<Postgres> for CreditAndNotify {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        self.credit.handle(msg, conn).await?;
        let out = OutgoingMessage::new("billing.credited", msg.payload().to_vec()).caused_by(msg);
        self.outbox
            .write(conn, &out)
            .await
            .map_err(HandlerError::transient)?;
        Ok(())
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut PgConnection,
    ) -> Result<(), HandlerError> {
        self.credit.handle_batch(msgs, conn).await?;
        let out: Vec<OutgoingMessage> = msgs
            .iter()
            .map(|msg| {
                OutgoingMessage::new("billing.credited", msg.payload().to_vec()).caused_by(msg)
            })
            .collect();
        self.outbox
            .write_many(conn, &out)
            .await
            .map_err(HandlerError::transient)?;
        Ok(())
    }
}

fn fresh(n: usize) -> Vec<Envelope> {
    (0..n)
        .map(|_| {
            Envelope::new(
                MessageId::from_uuid(uuid::Uuid::now_v7()),
                b"{\"credit\":1}".to_vec(),
            )
        })
        .collect()
}

/// Messages a second through `processor`, one a transaction or in batches.
async fn drive<H: Handler<Postgres>>(
    processor: &Processor<PgStore, H>,
    workers: usize,
    batch: Option<usize>,
    dur: Duration,
) -> anyhow::Result<f64> {
    let processor = processor.clone();
    let (n, secs) = crate::load::for_duration(workers, dur, move || {
        let processor = processor.clone();
        async move {
            match batch {
                None => {
                    let env = &fresh(1)[0];
                    anyhow::ensure!(processor.process(env, Some(1)).await? == Outcome::Processed);
                    Ok(1)
                }
                Some(n) => {
                    let msgs = fresh(n);
                    let counts = vec![Some(1); n];
                    for r in processor.process_batch_with_counts(&msgs, &counts).await {
                        anyhow::ensure!(r? == Outcome::Processed);
                    }
                    Ok(n as u64)
                }
            }
        }
    })
    .await?;
    Ok(n as f64 / secs)
}

/// A handler with one outbox row against the same handler without it: the outbox waking the
/// relays at each commit (the default), and a quiet one (the relays poll).
async fn handler_cost(store: &PgStore, args: &Args) -> anyhow::Result<()> {
    let consumer = ConsumerName::new("bench")?;
    let plain = Processor::new(
        store.clone(),
        consumer.clone(),
        Credit { accounts: ACCOUNTS },
    );
    plain.ensure_ready().await?;
    let outbox = Outbox::new(store.clone()).for_consumer(consumer.clone());
    let with = |outbox: Outbox<PgStore>| {
        Processor::new(
            store.clone(),
            consumer.clone(),
            CreditAndNotify {
                credit: Credit { accounts: ACCOUNTS },
                outbox,
            },
        )
    };
    let (notifying, quiet) = (with(outbox.clone()), with(outbox.quiet()));
    let dur = Duration::from_secs_f64(args.seconds);
    // (batch, [with, quiet, without] msg/s)
    let mut results: Vec<(Option<usize>, [f64; 3])> = Vec::new();
    for round in 0..args.rounds {
        for batch in [None, Some(args.batch)] {
            let mut row = [0.0; 3];
            for k in 0..3 {
                let i = (k + round) % 3;
                row[i] = match i {
                    0 => drive(&notifying, args.workers, batch, dur).await?,
                    1 => drive(&quiet, args.workers, batch, dur).await?,
                    _ => drive(&plain, args.workers, batch, dur).await?,
                };
                // The rows written stay unsent: cleared so that the table does not grow
                // across measurements.
                sqlx::query("TRUNCATE inboxed_outbox_messages")
                    .execute(store.pool())
                    .await?;
            }
            println!(
                "round {}, {}: with one outbox row {:.0} msg/s, quiet {:.0} msg/s, without {:.0} \
                 msg/s",
                round + 1,
                label(batch),
                row[0],
                row[1],
                row[2]
            );
            results.push((batch, row));
        }
    }
    println!();
    println!(
        "| processing | with one outbox row msg/s | quiet (no NOTIFY) msg/s | without msg/s | \
         with / without | quiet / without |"
    );
    println!("|---|---|---|---|---|---|");
    for batch in [None, Some(args.batch)] {
        let of = |f: &dyn Fn(&[f64; 3]) -> f64| {
            crate::median(
                results
                    .iter()
                    .filter(|r| r.0 == batch)
                    .map(|r| f(&r.1))
                    .collect(),
            )
        };
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            label(batch),
            of(&|r| r[0]),
            of(&|r| r[1]),
            of(&|r| r[2]),
            of(&|r| r[0] / r[2]),
            of(&|r| r[1] / r[2])
        );
    }
    println!();
    Ok(())
}

fn label(batch: Option<usize>) -> String {
    batch.map_or_else(
        || "one a transaction".to_owned(),
        |n| format!("batches of {n} (`write_many`)"),
    )
}

/// Commit-to-confirm latency at a steady rate, through RabbitMQ, the relay at its defaults.
async fn latency(store: &PgStore, args: &Args) -> anyhow::Result<()> {
    let conn = Connection::connect(&args.broker.amqp_url, ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    let queue = format!("inboxed-bench-latency-{}", uuid::Uuid::now_v7());
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await?;
    sqlx::query("TRUNCATE inboxed_outbox_messages")
        .execute(store.pool())
        .await?;
    let publisher =
        RabbitPublisher::connect(RabbitPublisherConfig::new(&args.broker.amqp_url)).await?;
    let mut config = args.relay();
    if let Some(n) = args.latency_batch {
        config = config.batch_size(n);
    }
    let relay = OutboxRelay::new(store.clone(), publisher, config);
    let total = (f64::from(args.rate) * args.latency_seconds) as u64;
    let writer = {
        let (store, queue, rate) = (store.clone(), queue.clone(), args.rate);
        async move {
            let outbox = Outbox::new(store.clone());
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut pending = tokio::task::JoinSet::new();
            for _ in 0..total {
                tick.tick().await;
                let (store, outbox, queue) = (store.clone(), outbox.clone(), queue.clone());
                // Each write is its own transaction, committed on a task of its own, so that a
                // slow commit does not hold back the rate.
                pending.spawn(async move {
                    let mut tx = store.begin(&BeginParams::default()).await?;
                    outbox
                        .write(&mut tx, &OutgoingMessage::new(queue, b"{}".to_vec()))
                        .await?;
                    tx.commit().await?;
                    Ok::<(), anyhow::Error>(())
                });
                while let Some(done) = pending.try_join_next() {
                    done??;
                }
            }
            while let Some(done) = pending.join_next().await {
                done??;
            }
            Ok::<(), anyhow::Error>(())
        }
    };
    let pool = store.pool().clone();
    let drained = async move {
        writer.await?;
        loop {
            let unsent: i64 = sqlx::query_scalar(UNSENT).fetch_one(&pool).await?;
            if unsent == 0 {
                return Ok::<(), anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let stop = async move {
        let _ = rx.await;
    };
    let (relayed, written) = tokio::join!(relay.run(stop), async {
        let r = drained.await;
        let _ = tx.send(());
        r
    });
    written?;
    relayed?;
    let (p50, p99, n): (f64, f64, i64) = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms),
                percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), count(*)
         FROM (SELECT extract(epoch FROM sent_at - created_at) * 1000 AS ms
               FROM inboxed_outbox_messages WHERE status = 'sent') t",
    )
    .fetch_one(store.pool())
    .await?;
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await?;
    println!(
        "| rate | rows | commit to confirm p50 | p99 |\n|---|---|---|---|\n| {} rows/s for {} s \
         | {n} | {p50:.1} ms | {p99:.1} ms |",
        args.rate, args.latency_seconds
    );
    println!(
        "(from each row's created_at, set inside its transaction just before the commit, to its \
         sent_at, set when the relay marks it after the broker's confirmation: the commit, the \
         NOTIFY, the claim, the publish, the confirm and the mark)"
    );
    Ok(())
}
