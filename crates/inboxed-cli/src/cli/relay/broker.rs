//! The broker named by `--from`, connected as a delivery source, and the relay run on it.
//! Each source type is its own generic instantiation, so this is a match, not a `dyn`.

use std::future::Future;

use anyhow::{Context, bail};

use inboxed_core::inbox::{InboxRelay, InboxStore};

use super::settings::Settings;

/// Connects to the broker `settings.from` names and relays its deliveries through `relay`
/// until `shutdown`.
pub(crate) async fn relay_from<S: InboxStore>(
    relay: &InboxRelay<S>,
    s: &Settings,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
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
            let source = inboxed_rabbitmq::RabbitSource::connect(config).await?;
            Ok(relay.run(source, shutdown).await?)
        }
        "nats" | "tls" => {
            let mut config =
                inboxed_nats::NatsConfig::new(&s.from, need(&s.stream, "stream")?, &s.group)
                    .prefetch(s.prefetch)
                    .key(s.key.clone());
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            let source = inboxed_nats::NatsSource::connect(config).await?;
            Ok(relay.run(source, shutdown).await?)
        }
        "redis" | "rediss" => {
            let mut config =
                inboxed_redis::RedisConfig::new(&s.from, need(&s.stream, "stream")?, &s.group)
                    .prefetch(s.prefetch)
                    .key(s.key.clone());
            config.tls_ca_file.clone_from(&s.tls_ca_file);
            let source = inboxed_redis::RedisSource::connect(config).await?;
            Ok(relay.run(source, shutdown).await?)
        }
        #[cfg(feature = "kafka")]
        "kafka" => {
            let brokers = s.from.trim_start_matches("kafka://").trim_end_matches('/');
            let config =
                inboxed_kafka::KafkaConfig::new(brokers, &s.group, [need(&s.topic, "topic")?])
                    .prefetch(s.prefetch)
                    .key(s.key.clone());
            let source = inboxed_kafka::KafkaSource::connect(config).await?;
            Ok(relay.run(source, shutdown).await?)
        }
        #[cfg(feature = "sqs")]
        "sqs+https" | "sqs+http" => {
            let config = inboxed_sqs::SqsConfig::new(s.from.trim_start_matches("sqs+"))
                .prefetch(s.prefetch)
                .key(s.key.clone());
            let source = inboxed_sqs::SqsSource::connect(config).await?;
            Ok(relay.run(source, shutdown).await?)
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
