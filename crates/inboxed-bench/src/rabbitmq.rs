//! `inboxed-bench rabbitmq`: messages per second from RabbitMQ through the processor into
//! PostgreSQL at several prefetch settings, against the same consumer acking after the business
//! update alone (no inbox), measured in the same run and interleaved.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use sqlx::PgPool;
use tokio::task::JoinSet;

use inboxed_core::{
    BoxError, Consumer, ConsumerConfig, ConsumerName, Delivery, DeliverySource, Envelope,
    EnvelopeError, Processor,
};
use inboxed_postgres::PgStore;
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};

use crate::variants::{Credit, bench_store, business_only};

/// The broker the RabbitMQ scenarios fill and drain.
#[derive(Debug, clap::Args)]
pub(crate) struct Broker {
    /// AMQP URI of the broker.
    #[arg(
        long,
        env = "INBOXED_AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f"
    )]
    pub(crate) amqp_url: String,
}

/// RabbitMQ → processor → PostgreSQL against RabbitMQ → update → ack.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    broker: Broker,
    /// Prefetch settings to measure (comma-separated); the consumer's concurrency follows.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,400")]
    prefetch: Vec<usize>,
    /// Messages per measurement.
    #[arg(long, default_value_t = 5_000)]
    messages: u64,
    /// Rounds; each measures every prefetch with both consumers.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

pub(crate) const ACCOUNTS: i64 = 10_000;
/// Database connections for either consumer (the server's limit is 100 by default).
const POOL: usize = 32;

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    // Both consumers share the pool's bound: past it, deliveries wait for a connection.
    let store = bench_store(server, POOL, ACCOUNTS).await?;
    let pool = store.pool().clone();
    let processor = Processor::new(
        store,
        ConsumerName::new("bench")?,
        Credit { accounts: ACCOUNTS },
    );
    processor.ensure_ready().await?;
    let conn = Connection::connect(&args.broker.amqp_url, ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    println!(
        "{} messages per measurement, {} rounds, persistent messages on a durable classic queue, \
         {POOL} database connections",
        args.messages, args.rounds
    );
    // (prefetch, inbox msg/s, bare msg/s, batched inbox msg/s) per round.
    let mut results: Vec<(usize, f64, f64, f64)> = Vec::new();
    for round in 1..=args.rounds {
        for &prefetch in &args.prefetch {
            let single = ConsumerConfig::default().concurrency(prefetch);
            let inbox = measure(
                &channel,
                &args.broker.amqp_url,
                args.messages,
                prefetch,
                |source, target| through_inbox(processor.clone(), source, single, target),
            )
            .await?;
            let batched = batched(prefetch);
            let in_batches = measure(
                &channel,
                &args.broker.amqp_url,
                args.messages,
                prefetch,
                |source, target| through_inbox(processor.clone(), source, batched, target),
            )
            .await?;
            let bare = measure(
                &channel,
                &args.broker.amqp_url,
                args.messages,
                prefetch,
                |source, target| without_inbox(pool.clone(), source, prefetch, target),
            )
            .await?;
            println!(
                "round {round}, prefetch {prefetch}: inbox {inbox:.0} msg/s, inbox in batches \
                 {in_batches:.0} msg/s, without inbox {bare:.0} msg/s"
            );
            results.push((prefetch, inbox, bare, in_batches));
        }
    }
    println!();
    println!(
        "| prefetch | inbox msg/s | inbox in batches msg/s (batches x size) | without inbox msg/s | \
         inbox / without | batches / without |"
    );
    println!("|---|---|---|---|---|---|");
    for &prefetch in &args.prefetch {
        let of = |f: fn(&(usize, f64, f64, f64)) -> f64| {
            crate::median(results.iter().filter(|r| r.0 == prefetch).map(f).collect())
        };
        let b = batched(prefetch);
        println!(
            "| {prefetch} | {:.0} | {:.0} ({} x {}) | {:.0} | {:.2} | {:.2} |",
            of(|r| r.1),
            of(|r| r.3),
            b.concurrency,
            b.batch_size,
            of(|r| r.2),
            of(|r| r.1 / r.2),
            of(|r| r.3 / r.2)
        );
    }
    Ok(())
}

/// Declares a durable queue named `prefix` and a fresh time-ordered id; its name.
pub(crate) async fn fresh_queue(channel: &Channel, prefix: &str) -> anyhow::Result<String> {
    let queue = format!("{prefix}-{}", uuid::Uuid::now_v7());
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await?;
    Ok(queue)
}

/// Fills a fresh queue with `messages` keyed messages, then times `consume` (given the source
/// and how many acks to wait for) until it returns.
pub(crate) async fn measure<F, Fut>(
    channel: &Channel,
    amqp_url: &str,
    messages: u64,
    prefetch: usize,
    consume: F,
) -> anyhow::Result<f64>
where
    F: FnOnce(RabbitSource, u64) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let queue = fresh_queue(channel, "inboxed-bench").await?;
    let mut confirms = Vec::new();
    for _ in 0..messages {
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(uuid::Uuid::now_v7().to_string().into());
        confirms.push(
            channel
                .basic_publish(
                    "".into(),
                    queue.as_str().into(),
                    BasicPublishOptions::default(),
                    b"{\"credit\":1}",
                    props,
                )
                .await?,
        );
    }
    for confirm in confirms {
        confirm.await?;
    }
    let config = RabbitConfig::new(amqp_url, queue.clone()).prefetch(prefetch);
    let source = RabbitSource::connect(config).await?;
    let started = Instant::now();
    consume(source, messages).await?;
    let rate = messages as f64 / started.elapsed().as_secs_f64();
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await?;
    Ok(rate)
}

/// The batched consumer for a prefetch: batches of up to 50 (one of the whole prefetch below
/// that), as many in flight as fill the prefetch.
pub(crate) fn batched(prefetch: usize) -> ConsumerConfig {
    let concurrency = (prefetch / 50).max(1);
    ConsumerConfig::default()
        .concurrency(concurrency)
        .batch_size(prefetch / concurrency)
}

/// The consumer loop with the processor, as `config` says, until `target` acks.
pub(crate) async fn through_inbox<H: inboxed_core::Handler<sqlx::Postgres>>(
    processor: Processor<PgStore, H>,
    source: RabbitSource,
    config: ConsumerConfig,
    target: u64,
) -> anyhow::Result<()> {
    let acked = Arc::new(AtomicU64::new(0));
    let counted = Counted {
        inner: source,
        acked: Arc::clone(&acked),
    };
    let all_acked = async move {
        while acked.load(Ordering::Relaxed) < target {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    Consumer::new(processor, config)
        .run(counted, all_acked)
        .await?;
    Ok(())
}

/// The same source and concurrency, each delivery settled by the business update alone in its
/// own transaction, then acked: what a consumer without the inbox does.
async fn without_inbox(
    pool: PgPool,
    mut source: RabbitSource,
    prefetch: usize,
    target: u64,
) -> anyhow::Result<()> {
    let mut tasks: JoinSet<anyhow::Result<()>> = JoinSet::new();
    let mut taken = 0;
    while taken < target {
        while tasks.len() >= prefetch {
            tasks.join_next().await.transpose()?.transpose()?;
        }
        let Some(delivery) = source.next().await else {
            anyhow::bail!("the source ended");
        };
        let delivery = delivery.map_err(|e| anyhow::anyhow!(e))?;
        taken += 1;
        let pool = pool.clone();
        tasks.spawn(async move {
            business_only(&pool, ACCOUNTS).await?;
            delivery.ack().await.map_err(|e| anyhow::anyhow!(e))?;
            Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// Counts acks that went through, so the run knows when the queue is drained.
struct Counted<S> {
    inner: S,
    acked: Arc<AtomicU64>,
}

struct CountedDelivery<D> {
    inner: D,
    acked: Arc<AtomicU64>,
}

impl<S: DeliverySource> DeliverySource for Counted<S> {
    type Delivery = CountedDelivery<S::Delivery>;

    async fn next(&mut self) -> Option<Result<Self::Delivery, BoxError>> {
        let acked = Arc::clone(&self.acked);
        self.inner
            .next()
            .await
            .map(|r| r.map(|inner| CountedDelivery { inner, acked }))
    }

    async fn idle(&mut self) {
        self.inner.idle().await;
    }
    async fn close(self) {
        self.inner.close().await;
    }
}

impl<D: Delivery> Delivery for CountedDelivery<D> {
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        self.inner.envelope()
    }

    fn payload(&self) -> &[u8] {
        self.inner.payload()
    }

    fn delivery_count(&self) -> Option<u32> {
        self.inner.delivery_count()
    }

    fn system(&self) -> Option<&'static str> {
        self.inner.system()
    }

    fn is_first_delivery(&self) -> bool {
        self.inner.is_first_delivery()
    }

    async fn ack(self) -> Result<(), BoxError> {
        self.inner.ack().await?;
        self.acked.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn requeue(self, delay: Option<Duration>) -> Result<(), BoxError> {
        self.inner.requeue(delay).await
    }

    async fn reject(self) -> Result<(), BoxError> {
        self.inner.reject().await
    }
}
