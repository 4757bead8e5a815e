//! The broker named by `--from`, connected as a delivery source, and the relay run on it.
//! Each source type is its own generic instantiation, so this is a match, not a `dyn`.

use anyhow::{Context, bail};

use inboxed_core::inbox::{InboxRelay, InboxStore};

use super::settings::Settings;
use crate::cli::daemon::{Broker, Shutdown, Status, until_up};

/// Connects to the broker `settings.from` names, waiting for it while it is not up, and
/// relays its deliveries through `relay` until a stop is asked for: `false` when the stop came
/// before the broker did.
pub(crate) async fn relay_from<S: InboxStore>(
    relay: &InboxRelay<S>,
    s: &Settings,
    status: &Status,
    shutdown: &Shutdown,
) -> anyhow::Result<bool> {
    // Relays from the source `connect` opens, once its broker answers: `false` when a stop
    // comes first.
    macro_rules! relay_on {
        ($connect:expr) => {{
            let Some(source) = until_up("the broker", status, shutdown, || async {
                Ok($connect.await?)
            })
            .await
            else {
                return Ok(false);
            };
            status.running(Broker::from_url(&s.from));
            relay.run(source, shutdown.requested()).await?;
            Ok(true)
        }};
    }
    let scheme = s.from.split_once("://").map_or("", |(scheme, _)| scheme);
    let need = |v: &Option<String>, flag: &str| {
        v.clone()
            .with_context(|| format!("--{flag} is required for a {scheme}:// broker"))
    };
    if s.tls_ca_file.is_some() && !matches!(scheme, "amqps" | "nats" | "tls" | "rediss") {
        bail!("--tls-ca-file applies to amqps://, nats:// or tls:// and rediss:// brokers");
    }
    match scheme {
        "amqp" | "amqps" => {
            let mut config = inboxed_rabbitmq::RabbitConfig::new(&s.from, need(&s.queue, "queue")?)
                .prefetch(s.prefetch)
                .key(s.key.clone());
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            relay_on!(inboxed_rabbitmq::RabbitSource::connect(config.clone()))
        }
        "nats" | "tls" => {
            let mut config =
                inboxed_nats::NatsConfig::new(&s.from, need(&s.stream, "stream")?, &s.group)
                    .prefetch(s.prefetch)
                    .key(s.key.clone());
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            relay_on!(inboxed_nats::NatsSource::connect(config.clone()))
        }
        "redis" | "rediss" => {
            let mut config =
                inboxed_redis::RedisConfig::new(&s.from, need(&s.stream, "stream")?, &s.group)
                    .prefetch(s.prefetch)
                    .key(s.key.clone());
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            relay_on!(inboxed_redis::RedisSource::connect(config.clone()))
        }
        #[cfg(feature = "kafka")]
        "kafka" => {
            let brokers = s.from.trim_start_matches("kafka://").trim_end_matches('/');
            let config =
                inboxed_kafka::KafkaConfig::new(brokers, &s.group, [need(&s.topic, "topic")?])
                    .prefetch(s.prefetch)
                    .key(s.key.clone());
            relay_on!(inboxed_kafka::KafkaSource::connect(config.clone()))
        }
        #[cfg(feature = "sqs")]
        "sqs+https" | "sqs+http" => {
            let config = inboxed_sqs::SqsConfig::new(s.from.trim_start_matches("sqs+"))
                .prefetch(s.prefetch)
                .key(s.key.clone());
            relay_on!(inboxed_sqs::SqsSource::connect(config.clone()))
        }
        #[cfg(not(feature = "kafka"))]
        "kafka" => bail!("--from kafka://: this inboxed was built without the `kafka` feature"),
        #[cfg(not(feature = "sqs"))]
        "sqs+https" | "sqs+http" => {
            bail!("--from {scheme}://: this inboxed was built without the `sqs` feature")
        }
        _ => bail!(
            "--from: unknown broker scheme {scheme:?}; use amqp://, nats://, redis://, kafka:// or sqs+https://"
        ),
    }
}
