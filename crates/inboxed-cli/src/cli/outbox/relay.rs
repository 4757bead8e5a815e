//! `inboxed outbox relay`: an [`OutboxRelay`] over the database's outbox and a broker's
//! publisher, with the settings of [`settings`](super::settings).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use tracing::info;

use inboxed_core::outbox::store::OutboxStore;
use inboxed_core::outbox::{Confirmation, OutboxRelay, OutboxRow, Publisher};
use inboxed_nats::{NatsPublisher, NatsPublisherConfig};
use inboxed_rabbitmq::{RabbitPublisher, RabbitPublisherConfig};
use inboxed_redis::{RedisPublisher, RedisPublisherConfig};

use super::settings::{Args, Settings};
use crate::cli::AnyStore;
use crate::cli::daemon::{Broker, Daemon, Shutdown, Status, until_up};
use crate::cli::database::redact;

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let shutdown = Shutdown::listen("outbox relay")?;
    let s = args.resolve()?;
    let status = Status::default();
    let daemon = Daemon::start(s.metrics_addr, &status, &shutdown).await?;
    let is_pg = s.database.starts_with("postgres://") || s.database.starts_with("postgresql://");
    let schema = s
        .schema
        .clone()
        .unwrap_or_else(|| (if is_pg { "public" } else { "main" }).to_owned());
    // The claim loops (two each while a lock-held batch records itself), the reaper's pass and
    // the listener.
    let connections = u32::try_from(2 * s.relay.concurrency + 2).unwrap_or(u32::MAX);
    let namespace = Some((schema.as_str(), s.table_prefix.as_str()));
    let open = || AnyStore::connect_in(&s.database, connections, namespace);
    let before_start = "outbox relay stopped before it started";
    let Some(store) = daemon.database(open, s.migrate).await else {
        return daemon.stopped(out, true, before_start).await;
    };
    let config = configure(&s)?;
    let reach = || connect(config.clone(), &s.broker);
    let Some(publisher) = until_up("the broker", &status, &shutdown, reach).await else {
        return daemon.stopped(out, true, before_start).await;
    };
    status.running(Broker::from_url(&s.broker));
    info!(database = %redact(&s.database), broker = %redact(&s.broker), "outbox relay starting");
    let relayed = daemon.bounded(async {
        match store {
            AnyStore::Postgres(store) => relay(store, publisher, &s, &shutdown).await,
            AnyStore::Sqlite(store) => relay(store, publisher, &s, &shutdown).await,
            AnyStore::MySql(store) => relay(store, publisher, &s, &shutdown).await,
        }
    });
    let drained = relayed.await?;
    let said = if drained {
        "outbox relay stopped"
    } else {
        "outbox relay stopped at its shutdown bound; rows not yet marked are published again"
    };
    daemon.stopped(out, drained, said).await
}

/// The publisher the broker URL names.
enum AnyPublisher {
    Rabbit(RabbitPublisher),
    Nats(NatsPublisher),
    Redis(RedisPublisher),
    #[cfg(feature = "kafka")]
    Kafka(inboxed_kafka::KafkaPublisher),
    #[cfg(feature = "sqs")]
    Sqs(inboxed_sqs::SqsPublisher),
}

impl Publisher for AnyPublisher {
    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        match self {
            Self::Rabbit(p) => p.publish(rows).await,
            Self::Nats(p) => p.publish(rows).await,
            Self::Redis(p) => p.publish(rows).await,
            #[cfg(feature = "kafka")]
            Self::Kafka(p) => p.publish(rows).await,
            #[cfg(feature = "sqs")]
            Self::Sqs(p) => p.publish(rows).await,
        }
    }

    fn system(&self) -> Option<&'static str> {
        match self {
            Self::Rabbit(p) => p.system(),
            Self::Nats(p) => p.system(),
            Self::Redis(p) => p.system(),
            #[cfg(feature = "kafka")]
            Self::Kafka(p) => p.system(),
            #[cfg(feature = "sqs")]
            Self::Sqs(p) => p.system(),
        }
    }
}

/// The publisher's settings, read from the broker URL and the routes before anything
/// connects: a mistake in them is an error at once, not a broker to wait for.
#[derive(Clone)]
enum PublisherConfig {
    Rabbit(RabbitPublisherConfig),
    Nats(NatsPublisherConfig),
    Redis(RedisPublisherConfig),
    #[cfg(feature = "kafka")]
    Kafka(inboxed_kafka::KafkaPublisherConfig),
    #[cfg(feature = "sqs")]
    Sqs(inboxed_sqs::SqsPublisherConfig),
}

fn configure(s: &Settings) -> anyhow::Result<PublisherConfig> {
    let scheme = s.broker.split_once("://").map_or("", |(scheme, _)| scheme);
    if s.tls_ca_file.is_some() && !matches!(scheme, "amqps" | "tls" | "nats" | "rediss") {
        bail!("--tls-ca-file applies to amqps://, nats:// or tls:// and rediss:// brokers");
    }
    match scheme {
        "amqp" | "amqps" => {
            let mut config = RabbitPublisherConfig::new(&s.broker);
            for (destination, target) in &s.routes {
                let Some((exchange, routing_key)) = target.split_once('/') else {
                    bail!(
                        "route {destination:?} = {target:?}: RabbitMQ routes are \
                         EXCHANGE/ROUTING_KEY (\"/queue\" for the default exchange)"
                    );
                };
                config = config.route(destination, exchange, routing_key);
            }
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            Ok(PublisherConfig::Rabbit(config))
        }
        "nats" | "tls" => {
            let mut config = NatsPublisherConfig::new(&s.broker);
            config.subjects.clone_from(&s.routes);
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            Ok(PublisherConfig::Nats(config))
        }
        "redis" | "rediss" => {
            let mut config = RedisPublisherConfig::new(&s.broker);
            config.streams.clone_from(&s.routes);
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            Ok(PublisherConfig::Redis(config))
        }
        #[cfg(feature = "kafka")]
        "kafka" => {
            let brokers = s
                .broker
                .trim_start_matches("kafka://")
                .trim_end_matches('/');
            let mut config = inboxed_kafka::KafkaPublisherConfig::new(brokers);
            config.topics.clone_from(&s.routes);
            Ok(PublisherConfig::Kafka(config))
        }
        #[cfg(feature = "sqs")]
        "sqs" | "sqs+https" | "sqs+http" => {
            let mut config = inboxed_sqs::SqsPublisherConfig::default();
            if scheme != "sqs" {
                config =
                    config.endpoint_url(s.broker.trim_start_matches("sqs+").trim_end_matches('/'));
            }
            config.queues.clone_from(&s.routes);
            Ok(PublisherConfig::Sqs(config))
        }
        #[cfg(not(feature = "kafka"))]
        "kafka" => bail!("--broker kafka://: this inboxed was built without the `kafka` feature"),
        #[cfg(not(feature = "sqs"))]
        "sqs" | "sqs+https" | "sqs+http" => {
            bail!("--broker {scheme}://: this inboxed was built without the `sqs` feature")
        }
        _ => bail!(
            "--broker {}: unknown broker scheme {scheme:?}; use amqp:// or amqps:// (RabbitMQ), \
             nats:// or tls:// (NATS JetStream), redis:// or rediss:// (Redis Streams), \
             kafka:// (Kafka) or sqs://, sqs+https:// (SQS)",
            redact(&s.broker)
        ),
    }
}

/// Connects the publisher `config` describes to `broker` (for the message when it cannot).
async fn connect(config: PublisherConfig, broker: &str) -> anyhow::Result<AnyPublisher> {
    let unreachable = || format!("cannot reach the broker {}", redact(broker));
    Ok(match config {
        PublisherConfig::Rabbit(c) => AnyPublisher::Rabbit(
            RabbitPublisher::connect(c)
                .await
                .with_context(unreachable)?,
        ),
        PublisherConfig::Nats(c) => {
            AnyPublisher::Nats(NatsPublisher::connect(c).await.with_context(unreachable)?)
        }
        PublisherConfig::Redis(c) => {
            AnyPublisher::Redis(RedisPublisher::connect(c).await.with_context(unreachable)?)
        }
        #[cfg(feature = "kafka")]
        PublisherConfig::Kafka(c) => AnyPublisher::Kafka(
            inboxed_kafka::KafkaPublisher::connect(c)
                .await
                .with_context(unreachable)?,
        ),
        #[cfg(feature = "sqs")]
        PublisherConfig::Sqs(c) => AnyPublisher::Sqs(
            inboxed_sqs::SqsPublisher::connect(c)
                .await
                .with_context(unreachable)?,
        ),
    })
}

async fn relay<S: OutboxStore, P: Publisher>(
    store: S,
    publisher: P,
    s: &Settings,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let relay = OutboxRelay::new(store, publisher, s.relay.clone());
    info!(relay = relay.id(), "outbox relay running");
    relay.run(shutdown.requested()).await?;
    Ok(())
}
