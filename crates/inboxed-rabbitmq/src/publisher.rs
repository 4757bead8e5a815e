//! The outbox relay's RabbitMQ side: publisher confirms, `mandatory` publishes, the outbox id
//! as the AMQP `message_id` (where [`RabbitConfig`](crate::RabbitConfig)'s default key source
//! reads it downstream).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection};
use lapin::{Confirmation as AmqpConfirmation, PublisherConfirm};
use tokio::sync::Mutex;
use tracing::{info, warn};

use inboxed_core::outbox::{Confirmation, OutboxRow, Publisher};

use crate::source::{RabbitError, connection};

/// Where a destination's messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The exchange (`""`: the default exchange, which routes to the queue named by the
    /// routing key).
    pub exchange: String,
    /// The routing key.
    pub routing_key: String,
}

/// Settings of a [`RabbitPublisher`]: plain fields, each with its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RabbitPublisherConfig {
    /// AMQP URI, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`; a cluster's nodes separated by
    /// commas where the host is, as in [`RabbitConfig::uri`](crate::RabbitConfig::uri). No
    /// default.
    pub uri: String,
    /// Routes by outbox destination. A destination with none goes to the default exchange
    /// with the destination as its routing key, that is to the queue of that name. Defaults to
    /// none.
    pub routes: BTreeMap<String, Route>,
    /// How long a batch's confirmations may take, from its last publish; past it the rows
    /// still unconfirmed are retried (under the same ids) and the connection is reopened.
    /// Keep it well below the relay's lease. Defaults to 10 s.
    pub confirm_timeout: Duration,
    /// How long connecting and opening the confirmed channel may take. Defaults to 15 s.
    pub connect_timeout: Duration,
    /// Payloads larger than this are refused for good without being sent: RabbitMQ closes the
    /// channel on a message above its `max_message_size` (16 MiB by default since 4.0), which
    /// would fail the rest of the batch with it. Defaults to 16 MiB.
    pub max_message_bytes: usize,
    /// For an `amqps://` URI: a PEM file of certificate authorities to trust beside the
    /// system's roots. Defaults to `None`.
    pub tls_ca_file: Option<PathBuf>,
}

impl RabbitPublisherConfig {
    /// Settings for publishing to `uri`, every other field at its default.
    #[must_use]
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            routes: BTreeMap::new(),
            confirm_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(15),
            max_message_bytes: 16 << 20,
            tls_ca_file: None,
        }
    }

    /// Routes `destination` to `exchange` with `routing_key`.
    #[must_use]
    pub fn route(
        mut self,
        destination: impl Into<String>,
        exchange: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        self.routes.insert(
            destination.into(),
            Route {
                exchange: exchange.into(),
                routing_key: routing_key.into(),
            },
        );
        self
    }

    /// Sets [`RabbitPublisherConfig::tls_ca_file`].
    #[must_use]
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// Sets [`RabbitPublisherConfig::routes`].
    #[must_use]
    pub fn routes(mut self, routes: BTreeMap<String, Route>) -> Self {
        self.routes = routes;
        self
    }

    /// Sets [`RabbitPublisherConfig::confirm_timeout`].
    #[must_use]
    pub fn confirm_timeout(mut self, confirm_timeout: Duration) -> Self {
        self.confirm_timeout = confirm_timeout;
        self
    }

    /// Sets [`RabbitPublisherConfig::connect_timeout`].
    #[must_use]
    pub fn connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// Sets [`RabbitPublisherConfig::max_message_bytes`].
    #[must_use]
    pub fn max_message_bytes(mut self, max_message_bytes: usize) -> Self {
        self.max_message_bytes = max_message_bytes;
        self
    }
}

/// Publishes outbox rows to RabbitMQ with publisher confirms on one channel; reconnects on the
/// next batch after the connection was lost.
#[derive(Debug)]
pub struct RabbitPublisher {
    config: RabbitPublisherConfig,
    live: Mutex<Option<Live>>,
    /// Channels this publisher opened, so that each [`Live`] is told apart.
    openings: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Live {
    #[allow(dead_code, reason = "holds the connection open for the channel")]
    conn: Connection,
    channel: Channel,
    /// Which opening this is: a new connection's channel may reuse the old one's id.
    opened: u64,
}

impl RabbitPublisher {
    /// Connects, so that a wrong URI or credentials fail here rather than in the relay's
    /// retries.
    ///
    /// # Errors
    /// [`RabbitError::Setup`] naming the step, [`RabbitError::TimedOut`] or
    /// [`RabbitError::CaFile`].
    pub async fn connect(config: RabbitPublisherConfig) -> Result<Self, RabbitError> {
        let live = open(&config, 0).await?;
        Ok(Self {
            config,
            live: Mutex::new(Some(live)),
            openings: std::sync::atomic::AtomicU64::new(1),
        })
    }

    /// The open channel, reconnecting first if the last batch lost it; the reason when the
    /// broker cannot be reached.
    async fn channel(&self, live: &mut Option<Live>) -> Result<(Channel, u64), String> {
        if let Some(l) = live {
            return Ok((l.channel.clone(), l.opened));
        }
        let opening = self
            .openings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let l = open(&self.config, opening)
            .await
            .map_err(|e| inboxed_core::error_chain(&e))?;
        info!("outbox publisher connected to RabbitMQ");
        let taken = (l.channel.clone(), l.opened);
        *live = Some(l);
        Ok(taken)
    }

    /// A publisher that connects at its first batch: for a relay that should start while the
    /// broker is away (its rows wait, their attempts untouched, until it is back).
    #[must_use]
    pub fn lazy(config: RabbitPublisherConfig) -> Self {
        Self {
            config,
            live: Mutex::new(None),
            openings: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn route<'a>(&'a self, row: &'a OutboxRow) -> (&'a str, &'a str) {
        match self.config.routes.get(&row.destination) {
            Some(r) => (&r.exchange, &r.routing_key),
            None => ("", &row.destination),
        }
    }

    /// What RabbitMQ cannot carry, refused before anything is sent: the field it names.
    fn unpublishable(&self, row: &OutboxRow) -> Option<String> {
        let (exchange, routing_key) = self.route(row);
        let short = [
            ("the exchange", Some(exchange)),
            ("the routing key", Some(routing_key)),
            (
                "message_type (the AMQP type property)",
                row.message_type.as_deref(),
            ),
            ("correlation_id", row.correlation_id.as_deref()),
        ];
        for (field, value) in short {
            if let Some(v) = value
                && v.len() > 255
            {
                return Some(format!("{field} is {} bytes; AMQP allows 255", v.len()));
            }
        }
        if let Some(name) = row.headers.keys().find(|k| k.len() > 255) {
            return Some(format!(
                "header name {:?}… is {} bytes; AMQP allows 255",
                &name[..name.floor_char_boundary(32)],
                name.len()
            ));
        }
        (row.payload.len() > self.config.max_message_bytes).then(|| {
            format!(
                "the payload is {} bytes, larger than max_message_bytes ({})",
                row.payload.len(),
                self.config.max_message_bytes
            )
        })
    }
}

/// Opens a connection and a channel in confirm mode, within the connect timeout: the
/// publisher's `opened`-th.
async fn open(config: &RabbitPublisherConfig, opened: u64) -> Result<Live, RabbitError> {
    let opening = async {
        let conn = connection(&config.uri, config.tls_ca_file.as_deref()).await?;
        let setup = |step| {
            move |source| RabbitError::Setup {
                step,
                queue: String::new(),
                source,
            }
        };
        let channel = conn
            .create_channel()
            .await
            .map_err(setup("open a channel"))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(setup("enable publisher confirms"))?;
        Ok(Live {
            conn,
            channel,
            opened,
        })
    };
    tokio::time::timeout(config.connect_timeout, opening)
        .await
        .map_err(|_| RabbitError::TimedOut {
            queue: String::new(),
            after: config.connect_timeout,
        })?
}

fn properties(row: &OutboxRow) -> BasicProperties {
    let mut headers = FieldTable::default();
    for (name, value) in &row.headers {
        headers.insert(
            ShortString::from(name.as_str()),
            AMQPValue::LongString(LongString::from(value.as_bytes())),
        );
    }
    let mut props = BasicProperties::default()
        .with_message_id(ShortString::from(row.message_id.as_str()))
        // Persistent: a confirmed message on a durable queue survives the broker's restart.
        .with_delivery_mode(2)
        .with_headers(headers);
    // When it was sent, in AMQP's seconds: what a consumer's lag is measured from.
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        props = props.with_timestamp(now.as_secs());
    }
    if let Some(kind) = &row.message_type {
        props = props.with_type(ShortString::from(kind.as_str()));
    }
    if let Some(id) = &row.correlation_id {
        props = props.with_correlation_id(ShortString::from(id.as_str()));
    }
    props
}

impl Publisher for RabbitPublisher {
    fn system(&self) -> Option<&'static str> {
        Some("rabbitmq")
    }

    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        // The lock covers only taking (or reopening) the channel: the claim loops of one
        // relay publish their batches on it side by side, each awaiting its own confirms.
        let (channel, opened) = match self.channel(&mut *self.live.lock().await).await {
            Ok(taken) => taken,
            Err(reason) => {
                return rows
                    .iter()
                    .map(|_| Confirmation::NotSent {
                        reason: reason.clone(),
                    })
                    .collect();
            }
        };
        // Every publish goes out before any confirmation is awaited: one round trip a batch.
        let mut pending: Vec<Result<PublisherConfirm, Confirmation>> =
            Vec::with_capacity(rows.len());
        let mut broken = None;
        for row in rows {
            if let Some(reason) = self.unpublishable(row) {
                pending.push(Err(Confirmation::Refused {
                    reason,
                    permanent: true,
                }));
                continue;
            }
            if let Some(reason) = &broken {
                pending.push(Err(Confirmation::NotSent {
                    reason: format!("the channel failed earlier in the batch: {reason}"),
                }));
                continue;
            }
            let (exchange, routing_key) = self.route(row);
            let sent = channel
                .basic_publish(
                    ShortString::from(exchange),
                    ShortString::from(routing_key),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    &row.payload,
                    properties(row),
                )
                .await;
            match sent {
                Ok(confirm) => pending.push(Ok(confirm)),
                Err(e) => {
                    let reason = e.to_string();
                    pending.push(Err(Confirmation::NotSent {
                        reason: reason.clone(),
                    }));
                    broken = Some(reason);
                }
            }
        }
        let deadline = tokio::time::Instant::now() + self.config.confirm_timeout;
        let mut outcomes = Vec::with_capacity(rows.len());
        for p in pending {
            let confirm = match p {
                Ok(confirm) => confirm,
                Err(outcome) => {
                    outcomes.push(outcome);
                    continue;
                }
            };
            let outcome = match tokio::time::timeout_at(deadline, confirm).await {
                Ok(Ok(AmqpConfirmation::Ack(None))) => Confirmation::Confirmed,
                Ok(Ok(AmqpConfirmation::Ack(Some(returned)))) => Confirmation::Refused {
                    reason: format!(
                        "unroutable (returned {} {})",
                        returned.reply_code, returned.reply_text
                    ),
                    permanent: false,
                },
                Ok(Ok(AmqpConfirmation::Nack(_))) => {
                    // A channel opened while a quorum queue had no leader (its node had just
                    // died) went on nacking every publish to it after a new one was elected
                    // (RabbitMQ 3.10, three nodes, `tests/cluster.rs`): the next batch opens
                    // another.
                    broken.get_or_insert_with(|| "the broker nacked a publish".to_owned());
                    Confirmation::Refused {
                        reason: "nacked: the broker could not store it".to_owned(),
                        permanent: false,
                    }
                }
                Ok(Ok(AmqpConfirmation::NotRequested)) => Confirmation::Unconfirmed {
                    reason: "the channel is not in confirm mode".to_owned(),
                },
                Ok(Err(e)) => {
                    broken.get_or_insert_with(|| e.to_string());
                    Confirmation::Unconfirmed {
                        reason: e.to_string(),
                    }
                }
                Err(_) => {
                    broken.get_or_insert_with(|| "confirmations timed out".to_owned());
                    Confirmation::Unconfirmed {
                        reason: format!("no confirmation within {:?}", self.config.confirm_timeout),
                    }
                }
            };
            outcomes.push(outcome);
        }
        if let Some(reason) = broken {
            warn!(
                error = reason,
                "outbox publisher lost its channel; reconnecting at the next batch"
            );
            // Dropped once, by the first batch to see it fail: a loop that already reopened
            // it keeps the new one.
            let mut live = self.live.lock().await;
            if live.as_ref().is_some_and(|l| l.opened == opened) {
                *live = None;
            }
        }
        outcomes
    }
}
