//! The relay's settings: flags, environment variables and a TOML file, in that order of
//! precedence, resolved into one plain struct.

use std::path::PathBuf;

use anyhow::{Context, bail};
use serde::Deserialize;

use inboxed_core::KeySource;

/// `inboxed relay`'s flags. Every one can also come from its environment variable or from the
/// TOML file given with `--config` (same names, `_` for `-`).
#[derive(Debug, Default, clap::Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Args {
    /// TOML file with any of these settings; flags and environment variables override it.
    #[arg(long, env = "INBOXED_RELAY_CONFIG")]
    #[serde(skip)]
    pub(crate) config: Option<PathBuf>,
    /// Broker URL: amqp://…, nats://…, redis://…, kafka://host:port[,host:port] (feature
    /// `kafka`), or sqs+https://…/account/queue (feature `sqs`; the queue URL after `sqs+`).
    #[arg(long, env = "INBOXED_RELAY_FROM", hide_env_values = true)]
    pub(crate) from: Option<String>,
    /// Database URL of the inbox table: postgres://… or sqlite://path.
    #[arg(long, env = "INBOXED_RELAY_TO", hide_env_values = true)]
    pub(crate) to: Option<String>,
    /// The consumer whose inbox the rows join: the name its workers claim with.
    #[arg(long, env = "INBOXED_RELAY_CONSUMER")]
    pub(crate) consumer: Option<String>,
    /// RabbitMQ: the queue to consume.
    #[arg(long, env = "INBOXED_RELAY_QUEUE")]
    pub(crate) queue: Option<String>,
    /// NATS JetStream or Redis: the stream to consume.
    #[arg(long, env = "INBOXED_RELAY_STREAM")]
    pub(crate) stream: Option<String>,
    /// Kafka: the topic to consume.
    #[arg(long, env = "INBOXED_RELAY_TOPIC")]
    pub(crate) topic: Option<String>,
    /// Redis or Kafka consumer group; NATS durable consumer. Defaults to the consumer name.
    #[arg(long, env = "INBOXED_RELAY_GROUP")]
    pub(crate) group: Option<String>,
    /// Where the message id comes from: `message-id` (the broker's id field, the default),
    /// `header:NAME`, `json:/pointer` or `cloudevents`.
    #[arg(long, env = "INBOXED_RELAY_KEY")]
    pub(crate) key: Option<String>,
    /// Deliveries fetched ahead of the database (the back-pressure bound). Default 512: the
    /// batches in flight, full (concurrency × batch size).
    #[arg(long, env = "INBOXED_RELAY_PREFETCH")]
    pub(crate) prefetch: Option<usize>,
    /// Batches stored at once (deliveries, with a batch size of 1). Default 4.
    #[arg(long, env = "INBOXED_RELAY_CONCURRENCY")]
    pub(crate) concurrency: Option<usize>,
    /// Deliveries stored in one transaction, then acked together; 1 stores each on its own.
    /// Default 128.
    #[arg(long, env = "INBOXED_RELAY_BATCH_SIZE")]
    pub(crate) batch_size: Option<usize>,
    /// PEM file of certificate authorities to trust for TLS to the broker (amqps://, NATS
    /// tls://, rediss://), for a broker whose certificate a private CA signs. Default: the
    /// system's roots.
    #[arg(long, env = "INBOXED_TLS_CA_FILE")]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// Serve `/metrics` (Prometheus), `/health` (ready) and `/health/live` on this address
    /// (`127.0.0.1:9464`). Default: none.
    #[arg(long, env = "INBOXED_RELAY_METRICS_ADDR")]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    /// Schema of the inbox tables (PostgreSQL). Default `public`.
    #[arg(long, env = "INBOXED_SCHEMA")]
    pub(crate) schema: Option<String>,
    /// Prefix of the inbox table names. Default `inboxed_`.
    #[arg(long, env = "INBOXED_TABLE_PREFIX")]
    pub(crate) table_prefix: Option<String>,
    /// Do not create or upgrade the inbox tables at start (they must then be current).
    /// `--no-migrate` alone means true; the variable takes true/false, yes/no, 1/0.
    #[arg(long, env = "INBOXED_RELAY_NO_MIGRATE", num_args = 0..=1, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) no_migrate: Option<bool>,
}

/// Everything the relay runs with, resolved.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) consumer: String,
    pub(crate) queue: Option<String>,
    pub(crate) stream: Option<String>,
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub(crate) topic: Option<String>,
    pub(crate) group: String,
    pub(crate) key: KeySource,
    pub(crate) prefetch: usize,
    pub(crate) concurrency: usize,
    pub(crate) batch_size: usize,
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    pub(crate) tls_ca_file: Option<PathBuf>,
    pub(crate) schema: Option<String>,
    pub(crate) table_prefix: String,
    pub(crate) migrate: bool,
}

impl Args {
    /// Flags and environment over the file over the defaults.
    pub(crate) fn resolve(self) -> anyhow::Result<Settings> {
        let file = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                toml::from_str::<Self>(&text)
                    .with_context(|| format!("invalid relay settings in {}", path.display()))?
            }
            None => Self::default(),
        };
        let need = |v: Option<String>, flag: &str| {
            v.with_context(|| format!("--{flag} is required (flag, environment or --config)"))
        };
        let consumer = need(self.consumer.or(file.consumer), "consumer")?;
        Ok(Settings {
            from: need(self.from.or(file.from), "from")?,
            to: need(self.to.or(file.to), "to")?,
            group: self
                .group
                .or(file.group)
                .unwrap_or_else(|| consumer.clone()),
            consumer,
            queue: self.queue.or(file.queue),
            stream: self.stream.or(file.stream),
            topic: self.topic.or(file.topic),
            key: parse_key(self.key.or(file.key).as_deref().unwrap_or("message-id"))?,
            prefetch: self.prefetch.or(file.prefetch).unwrap_or(512).max(1),
            concurrency: self.concurrency.or(file.concurrency).unwrap_or(4).max(1),
            batch_size: self.batch_size.or(file.batch_size).unwrap_or(128).max(1),
            metrics_addr: self.metrics_addr.or(file.metrics_addr),
            tls_ca_file: self.tls_ca_file.or(file.tls_ca_file),
            schema: self.schema.or(file.schema),
            table_prefix: self
                .table_prefix
                .or(file.table_prefix)
                .unwrap_or_else(|| "inboxed_".to_owned()),
            migrate: !self.no_migrate.or(file.no_migrate).unwrap_or(false),
        })
    }
}

/// `message-id`, `header:NAME`, `json:/pointer` or `cloudevents`.
pub(crate) fn parse_key(text: &str) -> anyhow::Result<KeySource> {
    Ok(match text.split_once(':') {
        None if text == "message-id" => KeySource::MessageIdProperty,
        None if text == "cloudevents" => KeySource::CloudEvents,
        Some(("header", name)) if !name.is_empty() => KeySource::Header(name.to_owned()),
        Some(("json", pointer)) if pointer.starts_with('/') => {
            KeySource::JsonField(pointer.to_owned())
        }
        _ => bail!("--key {text:?}: use message-id, header:NAME, json:/pointer or cloudevents"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keys_parse_or_name_the_forms() {
        assert_eq!(
            parse_key("message-id").unwrap(),
            KeySource::MessageIdProperty
        );
        assert_eq!(
            parse_key("header:x-id").unwrap(),
            KeySource::Header("x-id".into())
        );
        assert_eq!(
            parse_key("json:/a/b").unwrap(),
            KeySource::JsonField("/a/b".into())
        );
        assert_eq!(parse_key("cloudevents").unwrap(), KeySource::CloudEvents);
        let err = parse_key("json:a").unwrap_err().to_string();
        assert!(err.contains("json:/pointer"), "{err}");
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relay.toml");
        std::fs::write(
            &path,
            "from = \"amqp://file\"\nto = \"sqlite://file.db\"\nconsumer = \"billing\"\nprefetch = 7\nno_migrate = true\n",
        )
        .unwrap();
        let args = Args {
            config: Some(path.clone()),
            to: Some("postgres://flag".into()),
            no_migrate: Some(false),
            ..Args::default()
        };
        let s = args.resolve().unwrap();
        assert_eq!(
            (s.from.as_str(), s.to.as_str(), s.prefetch, s.concurrency),
            ("amqp://file", "postgres://flag", 7, 4)
        );
        assert!(
            s.migrate,
            "the flag's no_migrate=false wins over the file's true"
        );
        assert_eq!(s.group, "billing", "group defaults to the consumer");

        std::fs::write(&path, "form = \"typo\"\n").unwrap();
        let typo = Args {
            config: Some(path),
            ..Args::default()
        };
        let err = format!("{:#}", typo.resolve().unwrap_err());
        assert!(err.contains("unknown field `form`"), "{err}");
    }
}
