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
use crate::cli::database::redact;

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let s = args.resolve()?;
    if let Some(addr) = s.metrics_addr {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
    }
    let is_pg = s.database.starts_with("postgres://") || s.database.starts_with("postgresql://");
    let schema = s
        .schema
        .clone()
        .unwrap_or_else(|| (if is_pg { "public" } else { "main" }).to_owned());
    // The claim loops (two each while a lock-held batch records itself), the reaper's pass and
    // the listener.
    let connections = u32::try_from(2 * s.relay.concurrency + 2).unwrap_or(u32::MAX);
    let store =
        AnyStore::connect_in(&s.database, connections, Some((&schema, &s.table_prefix))).await?;
    if s.migrate {
        store.migrate().await?;
    }
    let publisher = publisher(&s).await?;
    info!(database = %redact(&s.database), broker = %redact(&s.broker), "outbox relay starting");
    match store {
        AnyStore::Postgres(store) => relay(store, publisher, &s).await,
        AnyStore::Sqlite(store) => relay(store, publisher, &s).await,
        AnyStore::MySql(store) => relay(store, publisher, &s).await,
    }?;
    writeln!(out, "outbox relay stopped")?;
    Ok(ExitCode::SUCCESS)
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

async fn publisher(s: &Settings) -> anyhow::Result<AnyPublisher> {
    let scheme = s.broker.split_once("://").map_or("", |(scheme, _)| scheme);
    if s.tls_ca_file.is_some() && !matches!(scheme, "amqps" | "tls" | "nats" | "rediss") {
        bail!("--tls-ca-file applies to amqps://, nats:// or tls:// and rediss:// brokers");
    }
    let unreachable = || format!("cannot reach the broker {}", redact(&s.broker));
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
            let p = RabbitPublisher::connect(config)
                .await
                .with_context(unreachable)?;
            Ok(AnyPublisher::Rabbit(p))
        }
        "nats" | "tls" => {
            let mut config = NatsPublisherConfig::new(&s.broker);
            config.subjects.clone_from(&s.routes);
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            let p = NatsPublisher::connect(config)
                .await
                .with_context(unreachable)?;
            Ok(AnyPublisher::Nats(p))
        }
        "redis" | "rediss" => {
            let mut config = RedisPublisherConfig::new(&s.broker);
            config.streams.clone_from(&s.routes);
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            let p = RedisPublisher::connect(config)
                .await
                .with_context(unreachable)?;
            Ok(AnyPublisher::Redis(p))
        }
        #[cfg(feature = "kafka")]
        "kafka" => {
            let brokers = s
                .broker
                .trim_start_matches("kafka://")
                .trim_end_matches('/');
            let mut config = inboxed_kafka::KafkaPublisherConfig::new(brokers);
            config.topics.clone_from(&s.routes);
            let p = inboxed_kafka::KafkaPublisher::connect(config)
                .await
                .with_context(unreachable)?;
            Ok(AnyPublisher::Kafka(p))
        }
        #[cfg(feature = "sqs")]
        "sqs" | "sqs+https" | "sqs+http" => {
            let mut config = inboxed_sqs::SqsPublisherConfig::default();
            if scheme != "sqs" {
                config =
                    config.endpoint_url(s.broker.trim_start_matches("sqs+").trim_end_matches('/'));
            }
            config.queues.clone_from(&s.routes);
            let p = inboxed_sqs::SqsPublisher::connect(config)
                .await
                .with_context(unreachable)?;
            Ok(AnyPublisher::Sqs(p))
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

async fn relay<S: OutboxStore, P: Publisher>(
    store: S,
    publisher: P,
    s: &Settings,
) -> anyhow::Result<()> {
    let relay = OutboxRelay::new(store, publisher, s.relay.clone());
    info!(relay = relay.id(), "outbox relay running");
    relay.run(crate::cli::relay::shutdown_signal()).await?;
    Ok(())
}
