//! `inboxed-bench restart`: the first minute after a consumer restarts against a minute of
//! steady state, measured in the same run. A consumer process (`Consumer` at its defaults over
//! `Processor` at its defaults, prefetch 32, a handler that holds its transaction 200 ms and
//! writes one ledger row) drains a backlog on a RabbitMQ quorum queue or a NATS JetStream
//! stream; after a warm-up and one measured minute it is stopped, gracefully (SIGTERM, waited
//! for) or with SIGKILL, and a new one started at once. The ratio is the messages whose ledger
//! rows committed in the minute after the signal over those of the minute before. No poison:
//! what a restart costs is the redelivered messages' wait, not a failure. At the end every
//! message is in the ledger at most once and none is dead-lettered.

use std::time::Duration;

use anyhow::Context as _;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::process::{Child, Command};

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Envelope, Handler, HandlerError};
use inboxed_core::{Processor, ProcessorConfig};
use inboxed_postgres::PgStore;

/// The broker a consumer restarts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Broker {
    /// A RabbitMQ quorum queue (it counts deliveries).
    Rabbitmq,
    /// A NATS JetStream stream with a durable pull consumer.
    Nats,
}

/// How the consumer is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Stop {
    /// SIGTERM, and the process's exit waited for (it settles what it holds).
    Graceful,
    /// SIGKILL: everything it held is redelivered.
    Kill,
}

/// Restart against steady state.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Brokers to measure.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "rabbitmq,nats"
    )]
    brokers: Vec<Broker>,
    /// Ways to stop the consumer.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "graceful,kill"
    )]
    stops: Vec<Stop>,
    /// Length of each measured window, seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// How long the handler holds its transaction, milliseconds.
    #[arg(long, default_value_t = 200)]
    handler_ms: u64,
    /// The broker's prefetch (RabbitMQ `basic.qos`, NATS pull batch).
    #[arg(long, default_value_t = 32)]
    prefetch: usize,
    /// RabbitMQ.
    #[arg(
        long,
        env = "INBOXED_AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f"
    )]
    amqp_url: String,
    /// NATS.
    #[arg(
        long,
        env = "INBOXED_NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    nats_url: String,
}

/// The consumer process: `inboxed-bench restart-consumer`, run by [`run`] only.
#[derive(Debug, clap::Args)]
pub(crate) struct ConsumerArgs {
    #[arg(long, value_enum)]
    broker: Broker,
    /// The benchmark database.
    #[arg(long)]
    url: String,
    /// The queue, or the stream (whose durable consumer has the same name).
    #[arg(long)]
    queue: String,
    #[arg(long)]
    amqp_url: String,
    #[arg(long)]
    nats_url: String,
    #[arg(long)]
    prefetch: usize,
    #[arg(long)]
    handler_ms: u64,
}

const CONSUMER: &str = "bench";

/// Holds its transaction `hold`, then writes the message's ledger row (its primary key says
/// no message is applied twice).
struct Ledger {
    hold: Duration,
}

impl Handler<sqlx::Postgres> for Ledger {
    async fn handle(
        &self,
        msg: &Envelope,
        conn: &mut sqlx::PgConnection,
    ) -> Result<(), HandlerError> {
        tokio::time::sleep(self.hold).await;
        sqlx::query("INSERT INTO bench_restart (message_id) VALUES ($1)")
            .bind(msg.id().as_str())
            .execute(conn)
            .await?;
        Ok(())
    }
}

pub(crate) async fn consumer(args: ConsumerArgs) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .connect(&args.url)
        .await?;
    let processor = Processor::with_config(
        PgStore::new(pool),
        ConsumerName::new(CONSUMER)?,
        Ledger {
            hold: Duration::from_millis(args.handler_ms),
        },
        ProcessorConfig::default(),
    );
    let consumer = Consumer::new(processor, ConsumerConfig::default());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let shutdown = async move {
        term.recv().await;
    };
    match args.broker {
        Broker::Rabbitmq => {
            let config = inboxed_rabbitmq::RabbitConfig::new(&args.amqp_url, args.queue)
                .prefetch(args.prefetch)
                .declare(inboxed_rabbitmq::QueueKind::Quorum);
            let source = inboxed_rabbitmq::RabbitSource::connect(config).await?;
            consumer.run(source, shutdown).await?;
        }
        Broker::Nats => {
            let config =
                inboxed_nats::NatsConfig::new(&args.nats_url, args.queue.clone(), args.queue)
                    .prefetch(args.prefetch);
            let source = inboxed_nats::NatsSource::connect(config).await?;
            consumer.run(source, shutdown).await?;
        }
    }
    Ok(())
}

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let (url, store) = crate::variants::bench_database(server, 4, 1).await?;
    let pool = store.pool().clone();
    sqlx::raw_sql(
        "CREATE TABLE bench_restart (message_id text PRIMARY KEY,
                                     at timestamptz NOT NULL DEFAULT clock_timestamp())",
    )
    .execute(&pool)
    .await?;
    let steady_rate = 8.0 * 1000.0 / args.handler_ms.max(1) as f64;
    // Enough for the warm-up, both windows and the restart, twice over.
    let messages = (steady_rate * (2 * args.seconds + 10) as f64 * 1.5) as u64 + 500;
    println!(
        "- a consumer process at the defaults (`ConsumerConfig::default()`: 8 at once; \
         `ProcessorConfig::default()`), prefetch {}, a handler holding its transaction {} ms; \
         {messages} messages queued; a {} s window of steady state, then the consumer stopped \
         and a new one started at once, and the {} s window from the signal",
        args.prefetch, args.handler_ms, args.seconds, args.seconds
    );
    println!();
    println!("| broker | stop | steady window | window after the restart | after / steady |");
    println!("|---|---|---|---|---|");
    for &broker in &args.brokers {
        for &stop in &args.stops {
            sqlx::query("TRUNCATE bench_restart").execute(&pool).await?;
            let (steady, after) = round(&args, &url, &pool, broker, stop, messages).await?;
            println!(
                "| {broker:?} | {stop:?} | {steady} | {after} | {:.2} |",
                after as f64 / steady.max(1) as f64
            );
        }
    }
    Ok(())
}

/// One restart: the processed counts of the steady window and of the window after it.
async fn round(
    args: &Args,
    url: &str,
    pool: &PgPool,
    broker: Broker,
    stop: Stop,
    messages: u64,
) -> anyhow::Result<(i64, i64)> {
    let queue = format!("inboxed-bench-restart-{}", uuid::Uuid::now_v7().simple());
    match broker {
        Broker::Rabbitmq => publish_rabbitmq(&args.amqp_url, &queue, messages).await?,
        Broker::Nats => publish_nats(&args.nats_url, &queue, messages).await?,
    }
    let window = Duration::from_secs(args.seconds);
    let mut child = spawn(args, url, broker, &queue)?;
    // Warm-up: the consumer is connected and its pool filled.
    while count(pool).await? < 100 {
        anyhow::ensure!(
            child.try_wait()?.is_none(),
            "the consumer process exited before it processed 100 messages"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let steady_from = now(pool).await?;
    tokio::time::sleep(window).await;
    let signalled = now(pool).await?;
    match stop {
        Stop::Graceful => {
            let pid = child.id().context("the consumer has no pid")?;
            let pid = rustix::process::Pid::from_raw(i32::try_from(pid)?)
                .context("the consumer's pid")?;
            rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
            let exited = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
            anyhow::ensure!(
                exited.is_ok(),
                "the consumer did not stop within 60 s of SIGTERM"
            );
        }
        Stop::Kill => {
            child.kill().await?;
        }
    }
    let mut child = spawn(args, url, broker, &queue)?;
    tokio::time::sleep(window).await;
    let steady = between(pool, steady_from, signalled).await?;
    let after = between(pool, signalled, signalled + window).await?;
    anyhow::ensure!(
        count(pool).await? < i64::try_from(messages)?,
        "the backlog ran out before the second window ended: queue more messages"
    );
    child.kill().await?;
    let dead: i64 =
        sqlx::query_scalar("SELECT count(*) FROM inboxed_dead_letters WHERE message_id LIKE $1")
            .bind(format!("{queue}-%"))
            .fetch_one(pool)
            .await?;
    anyhow::ensure!(dead == 0, "{dead} messages were dead-lettered");
    match broker {
        Broker::Rabbitmq => delete_queue(&args.amqp_url, &queue).await?,
        Broker::Nats => delete_stream(&args.nats_url, &queue).await?,
    }
    Ok((steady, after))
}

fn spawn(args: &Args, url: &str, broker: Broker, queue: &str) -> anyhow::Result<Child> {
    let broker = match broker {
        Broker::Rabbitmq => "rabbitmq",
        Broker::Nats => "nats",
    };
    Ok(Command::new(std::env::current_exe()?)
        .args([
            "restart-consumer",
            "--broker",
            broker,
            "--url",
            url,
            "--queue",
            queue,
        ])
        .args(["--amqp-url", &args.amqp_url, "--nats-url", &args.nats_url])
        .args(["--prefetch", &args.prefetch.to_string()])
        .args(["--handler-ms", &args.handler_ms.to_string()])
        .kill_on_drop(true)
        .spawn()?)
}

async fn count(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM bench_restart")
        .fetch_one(pool)
        .await?)
}

/// A point on the database's clock, in microseconds since the epoch.
#[derive(Debug, Clone, Copy)]
struct At(i64);

impl std::ops::Add<Duration> for At {
    type Output = Self;
    fn add(self, d: Duration) -> Self {
        Self(self.0 + i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    }
}

/// The database's clock, which stamps the ledger rows.
async fn now(pool: &PgPool) -> anyhow::Result<At> {
    let micros: i64 =
        sqlx::query_scalar("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")
            .fetch_one(pool)
            .await?;
    Ok(At(micros))
}

/// Ledger rows committed with a stamp in `[from, to)`.
async fn between(pool: &PgPool, from: At, to: At) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM bench_restart
         WHERE at >= to_timestamp($1::float8 / 1000000) AND at < to_timestamp($2::float8 / 1000000)",
    )
    .bind(from.0)
    .bind(to.0)
    .fetch_one(pool)
    .await?)
}

async fn publish_rabbitmq(amqp_url: &str, queue: &str, messages: u64) -> anyhow::Result<()> {
    use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
    use lapin::types::{AMQPValue, FieldTable};
    let conn = lapin::Connection::connect(amqp_url, lapin::ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    channel
        .queue_declare(queue.into(), QueueDeclareOptions::durable(), args)
        .await?;
    let mut confirms = Vec::new();
    for i in 0..messages {
        let props = lapin::BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(format!("{queue}-{i}").into());
        confirms.push(
            channel
                .basic_publish(
                    "".into(),
                    queue.into(),
                    BasicPublishOptions::default(),
                    b"{}",
                    props,
                )
                .await?,
        );
    }
    for confirm in confirms {
        confirm.await?;
    }
    conn.close(200, "published".into()).await?;
    Ok(())
}

async fn delete_queue(amqp_url: &str, queue: &str) -> anyhow::Result<()> {
    let conn = lapin::Connection::connect(amqp_url, lapin::ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    channel
        .queue_delete(queue.into(), lapin::options::QueueDeleteOptions::default())
        .await?;
    conn.close(200, "deleted".into()).await?;
    Ok(())
}

async fn publish_nats(nats_url: &str, stream: &str, messages: u64) -> anyhow::Result<()> {
    let client = async_nats::connect(nats_url).await?;
    let js = async_nats::jetstream::new(client);
    js.create_stream(async_nats::jetstream::stream::Config {
        name: stream.to_owned(),
        subjects: vec![stream.to_owned()],
        storage: async_nats::jetstream::stream::StorageType::File,
        ..Default::default()
    })
    .await?;
    let mut acks = Vec::new();
    for i in 0..messages {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("{stream}-{i}").as_str());
        acks.push(
            js.publish_with_headers(stream.to_owned(), headers, "{}".into())
                .await?,
        );
        if acks.len() >= 1_000 {
            for ack in acks.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in acks {
        ack.await?;
    }
    Ok(())
}

async fn delete_stream(nats_url: &str, stream: &str) -> anyhow::Result<()> {
    let client = async_nats::connect(nats_url).await?;
    async_nats::jetstream::new(client)
        .delete_stream(stream)
        .await?;
    Ok(())
}
