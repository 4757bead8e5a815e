//! The outbox relay's settings: flags, environment variables and a TOML file, in that order of
//! precedence (as `inboxed relay`'s), resolved into the library's own config.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use inboxed_core::inbox::ClaimMode;
use inboxed_core::outbox::OutboxRelayConfig;

/// `inboxed outbox relay`'s flags. Every one can also come from its environment variable or
/// from the TOML file given with `--config` (same names, `_` for `-`; `route` is a table
/// there: `[route]` then `"billing.charged" = "billing/charged"`).
#[derive(Debug, Default, clap::Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Args {
    /// TOML file with any of these settings; flags and environment variables override it.
    #[arg(long, env = "INBOXED_OUTBOX_CONFIG")]
    #[serde(skip)]
    pub(crate) config: Option<PathBuf>,
    /// Database URL of the outbox table: postgres://… or sqlite://path.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub(crate) database_url: Option<String>,
    /// Broker URL: amqp://… or amqps://… (RabbitMQ), nats://… or tls://… (NATS JetStream),
    /// redis://… or rediss://… (Redis Streams), kafka://HOST:PORT,… (Kafka) or sqs://,
    /// sqs+https://HOST (SQS); Kafka and SQS when built with the `kafka` and `sqs` features.
    #[arg(long, env = "INBOXED_OUTBOX_BROKER", hide_env_values = true)]
    pub(crate) broker: Option<String>,
    /// `DESTINATION=TARGET`, repeatable (the environment variable takes them comma-separated):
    /// where a destination's messages go. RabbitMQ: `EXCHANGE/ROUTING_KEY` (a destination with
    /// no route goes to the default exchange with the destination as routing key, that is to
    /// the queue of that name). NATS: the subject; Redis: the stream; Kafka: the topic; SQS: a
    /// queue URL or name (each by default the destination). Routes given as flags replace the
    /// file's.
    #[arg(long, env = "INBOXED_OUTBOX_ROUTES", value_delimiter = ',')]
    #[serde(skip)]
    pub(crate) route: Vec<String>,
    /// Rows per claim, published as one batch. Default 500.
    #[arg(long, env = "INBOXED_OUTBOX_BATCH_SIZE")]
    pub(crate) batch_size: Option<u32>,
    /// Claim loops at once. Default 2.
    #[arg(long, env = "INBOXED_OUTBOX_CONCURRENCY")]
    pub(crate) concurrency: Option<usize>,
    /// How a batch's rows are held while they are published: `lock-held` (one transaction
    /// locks them through the publish and settles them: one row version and one commit a
    /// batch; PostgreSQL only) or `lease` (claimed and marked in two transactions). Default
    /// `lock-held` on PostgreSQL, `lease` on SQLite.
    #[arg(long, env = "INBOXED_OUTBOX_CLAIM_MODE", value_parser = ["lock-held", "lease"])]
    pub(crate) claim_mode: Option<String>,
    /// Attempts before a refused or unconfirmed row is dead. Default 10.
    #[arg(long, env = "INBOXED_OUTBOX_MAX_ATTEMPTS")]
    pub(crate) max_attempts: Option<u32>,
    /// How long a claim holds before another relay may publish its rows again (`30s`, `2m`).
    /// Default 30s.
    #[arg(long, env = "INBOXED_OUTBOX_LEASE", value_parser = crate::cli::duration::parse_duration)]
    #[serde(default, with = "humane")]
    pub(crate) lease: Option<Duration>,
    /// How long sent rows are kept before the relay deletes them (`7d`, `12h`), `never`, or
    /// `0s` to delete each row as soon as the broker confirmed it.
    /// Dead rows are always kept. Default 7d.
    #[arg(long, env = "INBOXED_OUTBOX_SENT_RETENTION")]
    pub(crate) sent_retention: Option<String>,
    /// PEM file of certificate authorities to trust for TLS to the broker (amqps://, NATS
    /// tls://, rediss://).
    /// Default: the system's roots.
    #[arg(long, env = "INBOXED_TLS_CA_FILE")]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// Serve `/metrics` (Prometheus), `/health` (ready) and `/health/live` on this address
    /// (`127.0.0.1:9464`). Default: none.
    #[arg(long, env = "INBOXED_OUTBOX_METRICS_ADDR")]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    /// Schema of the outbox table (PostgreSQL). Default `public`.
    #[arg(long, env = "INBOXED_SCHEMA")]
    pub(crate) schema: Option<String>,
    /// Prefix of the table names. Default `inboxed_`.
    #[arg(long, env = "INBOXED_TABLE_PREFIX")]
    pub(crate) table_prefix: Option<String>,
    /// Do not create or upgrade the tables at start (they must then be current).
    /// `--no-migrate` alone means true; the variable takes true/false, yes/no, 1/0.
    #[arg(long, env = "INBOXED_OUTBOX_NO_MIGRATE", num_args = 0..=1, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) no_migrate: Option<bool>,
    /// The file's routes (`[route]`).
    #[arg(skip)]
    #[serde(rename = "route")]
    pub(crate) file_routes: BTreeMap<String, String>,
}

/// A TOML duration is written as on the command line (`"30s"`).
mod humane {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| crate::cli::duration::parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// Everything the relay runs with, resolved.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) database: String,
    pub(crate) broker: String,
    /// Destination to the broker's target, as written (the broker's publisher reads it).
    pub(crate) routes: BTreeMap<String, String>,
    pub(crate) relay: OutboxRelayConfig,
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
                toml::from_str::<Self>(&text).with_context(|| {
                    format!("invalid outbox relay settings in {}", path.display())
                })?
            }
            None => Self::default(),
        };
        let need = |v: Option<String>, flag: &str| {
            v.with_context(|| format!("--{flag} is required (flag, environment or --config)"))
        };
        let routes = if self.route.is_empty() {
            file.file_routes
                .iter()
                .map(|(d, target)| route(d, target))
                .collect::<anyhow::Result<_>>()?
        } else {
            self.route
                .iter()
                .map(|r| match r.split_once('=') {
                    Some((d, target)) => route(d, target),
                    None => bail!("--route {r:?}: write DESTINATION=TARGET"),
                })
                .collect::<anyhow::Result<_>>()?
        };
        let mut relay = OutboxRelayConfig::default();
        if let Some(n) = self.batch_size.or(file.batch_size) {
            relay = relay.batch_size(n);
        }
        if let Some(n) = self.concurrency.or(file.concurrency) {
            relay = relay.concurrency(n);
        }
        match self.claim_mode.or(file.claim_mode).as_deref() {
            None => {}
            Some("lock-held") => relay = relay.claim_mode(ClaimMode::LockHeld),
            Some("lease") => relay = relay.claim_mode(ClaimMode::Lease),
            Some(other) => bail!("claim_mode {other:?}: write lock-held or lease"),
        }
        if let Some(n) = self.max_attempts.or(file.max_attempts) {
            relay = relay.max_attempts(n);
        }
        if let Some(lease) = self.lease.or(file.lease) {
            relay = relay.lease(lease);
        }
        match self.sent_retention.or(file.sent_retention).as_deref() {
            None => {}
            Some("never") => relay = relay.sent_retention(None),
            Some(text) => {
                let keep = crate::cli::duration::parse_duration(text)
                    .map_err(|e| anyhow::anyhow!("--sent-retention: {e}, or never"))?;
                relay = relay.sent_retention(Some(keep));
            }
        }
        Ok(Settings {
            database: need(self.database_url.or(file.database_url), "database-url")?,
            broker: need(self.broker.or(file.broker), "broker")?,
            routes,
            relay,
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

/// One route, `destination` to `target`, both non-empty.
fn route(destination: &str, target: &str) -> anyhow::Result<(String, String)> {
    if destination.is_empty() || target.is_empty() {
        bail!("route {destination:?} = {target:?}: write DESTINATION=TARGET");
    }
    Ok((destination.to_owned(), target.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outbox.toml");
        std::fs::write(
            &path,
            "database_url = \"sqlite://file.db\"\nbroker = \"amqp://file\"\nbatch_size = 7\n\
             lease = \"2m\"\nsent_retention = \"never\"\nclaim_mode = \"lease\"\n[route]\n\"billing.charged\" = \"billing/charged.eu\"\n",
        )
        .unwrap();
        let s = Args {
            config: Some(path.clone()),
            broker: Some("amqp://flag".into()),
            ..Args::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(
            (s.database.as_str(), s.broker.as_str()),
            ("sqlite://file.db", "amqp://flag")
        );
        assert_eq!(
            (s.relay.batch_size, s.relay.concurrency, s.relay.lease),
            (7, 2, Duration::from_secs(120))
        );
        assert_eq!(s.routes["billing.charged"], "billing/charged.eu");
        assert_eq!(s.relay.sent_retention, None, "never keeps every sent row");
        assert_eq!(s.relay.claim_mode, Some(ClaimMode::Lease));
        let flagged = Args {
            config: Some(path.clone()),
            route: vec!["a=x/y".into()],
            ..Args::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(
            flagged.routes.keys().collect::<Vec<_>>(),
            ["a"],
            "flag routes replace the file's"
        );

        let bad = Args {
            config: Some(path.clone()),
            route: vec!["no-target".into()],
            ..Args::default()
        };
        let err = format!("{:#}", bad.resolve().unwrap_err());
        assert!(err.contains("DESTINATION=TARGET"), "{err}");

        std::fs::write(&path, "brokr = \"typo\"\n").unwrap();
        let typo = Args {
            config: Some(path),
            ..Args::default()
        };
        let err = format!("{:#}", typo.resolve().unwrap_err());
        assert!(err.contains("unknown field `brokr`"), "{err}");
    }
}
