//! The outbox relay's Kafka side: an idempotent producer (`enable.idempotence`, `acks=all`),
//! each record carrying the outbox id in the header `message_id` (where
//! [`KafkaSource`](crate::KafkaSource)'s default key source reads it) and the row's ordering
//! key as the record key, so that a key's records share a partition and keep their order.
//!
//! Kafka keeps no message ids: the idempotent producer only drops its own retries within one
//! producer session. A row re-sent after a relay crash is a second record with the same
//! `message_id`, and the next service's inbox settles it as a duplicate.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer as _};
use tracing::warn;

use inboxed_core::outbox::{CORRELATION_HEADER, Confirmation, OutboxRow, Publisher, TYPE_HEADER};

use crate::source::KafkaSetupError;

/// The header holding the outbox id: the one the consumer side reads by default.
const ID_HEADER: &str = "message_id";

/// Settings of a [`KafkaPublisher`]: plain fields, each with its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KafkaPublisherConfig {
    /// Bootstrap servers, e.g. `127.0.0.1:9092` (`bootstrap.servers`). No default.
    pub brokers: String,
    /// Topics by outbox destination. A destination with none is published to the topic of
    /// its own name. Defaults to none.
    pub topics: BTreeMap<String, String>,
    /// How long a record may take from the send to the brokers' acknowledgement by every
    /// in-sync replica, librdkafka's own retries included (`message.timeout.ms`); past it the
    /// row is retried under the same id. Keep it well below the relay's lease. Defaults to
    /// 10 s.
    pub delivery_timeout: Duration,
    /// The largest record, headers included (`message.max.bytes`): a larger one is refused
    /// before sending, for good. Keep it at or below the topic's `max.message.bytes`.
    /// Defaults to 1,000,000 bytes, Kafka's own default.
    pub max_message_bytes: usize,
    /// How long [`KafkaPublisher::connect`] waits for the brokers' metadata before it fails,
    /// naming them. Defaults to 10 s.
    pub connect_timeout: Duration,
    /// Further librdkafka properties (`security.protocol`, `sasl.*`, `compression.type`,
    /// `linger.ms`, …), set last; the idempotence and `acks` settings cannot be turned off
    /// here, since re-ordering or a lost acknowledged record would break the outbox's promise.
    pub properties: Vec<(String, String)>,
}

impl KafkaPublisherConfig {
    /// Settings for publishing to `brokers`, every other field at its default.
    #[must_use]
    pub fn new(brokers: impl Into<String>) -> Self {
        Self {
            brokers: brokers.into(),
            topics: BTreeMap::new(),
            delivery_timeout: Duration::from_secs(10),
            max_message_bytes: 1_000_000,
            connect_timeout: Duration::from_secs(10),
            properties: Vec::new(),
        }
    }

    /// Publishes `destination`'s messages to `topic`.
    #[must_use]
    pub fn topic(mut self, destination: impl Into<String>, topic: impl Into<String>) -> Self {
        self.topics.insert(destination.into(), topic.into());
        self
    }

    /// Sets [`KafkaPublisherConfig::max_message_bytes`].
    #[must_use]
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets [`KafkaPublisherConfig::delivery_timeout`].
    #[must_use]
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.delivery_timeout = timeout;
        self
    }

    /// Adds a librdkafka property to [`KafkaPublisherConfig::properties`].
    #[must_use]
    pub fn property(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((name.into(), value.into()));
        self
    }

    /// Sets [`KafkaPublisherConfig::topics`].
    #[must_use]
    pub fn topics(mut self, topics: BTreeMap<String, String>) -> Self {
        self.topics = topics;
        self
    }

    /// Sets [`KafkaPublisherConfig::connect_timeout`].
    #[must_use]
    pub fn connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// Sets [`KafkaPublisherConfig::properties`].
    #[must_use]
    pub fn properties(mut self, properties: Vec<(String, String)>) -> Self {
        self.properties = properties;
        self
    }
}

/// Notes librdkafka's "all brokers down", which it reports only to the context: records sent
/// meanwhile would wait in its queue and time out with their attempts counted.
#[derive(Debug, Default)]
struct Watch {
    down: Arc<AtomicBool>,
}

impl ClientContext for Watch {
    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.down.store(true, Ordering::Relaxed);
        }
        warn!(error = %error, reason, "Kafka producer error");
    }
}

type Producer = FutureProducer<Watch>;

/// Publishes outbox rows to Kafka. librdkafka reconnects by itself; while every broker is
/// down a batch is handed back unsent, and a producer that hit a fatal error (the idempotent
/// producer's sequence was broken) is replaced by a new one.
pub struct KafkaPublisher {
    config: KafkaPublisherConfig,
    producer: Mutex<Arc<Producer>>,
    down: Arc<AtomicBool>,
}

impl std::fmt::Debug for KafkaPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaPublisher")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl KafkaPublisher {
    /// Creates the producer and checks that a broker answers, so that a wrong address fails
    /// here rather than in the relay's retries.
    ///
    /// # Errors
    /// [`KafkaSetupError::Producer`] naming the step that failed.
    pub async fn connect(config: KafkaPublisherConfig) -> Result<Self, KafkaSetupError> {
        let down = Arc::new(AtomicBool::new(false));
        let producer =
            Arc::new(create(&config, &down).map_err(setup(&config, "create the producer"))?);
        reach(&producer, config.connect_timeout)
            .await
            .map_err(setup(&config, "reach the brokers"))?;
        Ok(Self {
            config,
            producer: Mutex::new(producer),
            down,
        })
    }

    fn topic<'a>(&'a self, row: &'a OutboxRow) -> &'a str {
        self.config
            .topics
            .get(&row.destination)
            .map_or(&row.destination, String::as_str)
    }

    /// The producer to send with: a new one after a fatal error, which leaves the old one
    /// refusing every record.
    fn producer(&self) -> Result<Arc<Producer>, KafkaError> {
        let mut held = self.producer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((code, reason)) = held.client().fatal_error() {
            warn!(
                ?code,
                reason, "Kafka producer hit a fatal error; creating a new one"
            );
            *held = Arc::new(create(&self.config, &self.down)?);
        }
        Ok(Arc::clone(&held))
    }

    /// Sends one record, or says why it cannot be: what Kafka would refuse for good is
    /// checked first, naming the field.
    fn send(&self, producer: &Producer, row: &OutboxRow) -> Result<DeliveryFuture, Confirmation> {
        let refuse = |reason: String| Confirmation::Refused {
            reason,
            permanent: true,
        };
        let topic = self.topic(row);
        if let Err(why) = legal_topic(topic) {
            return Err(refuse(format!("destination: topic {topic:?} {why}")));
        }
        let mut headers = OwnedHeaders::new_with_capacity(row.headers.len() + 3);
        let mut own = vec![(ID_HEADER, row.message_id.as_str())];
        own.extend(row.message_type.as_deref().map(|t| (TYPE_HEADER, t)));
        own.extend(
            row.correlation_id
                .as_deref()
                .map(|c| (CORRELATION_HEADER, c)),
        );
        for (name, value) in &row.headers {
            if own.iter().any(|(n, _)| n == name) {
                return Err(refuse(format!(
                    "headers: header {name:?} is the publisher's own (a consumer would read two)"
                )));
            }
            headers = headers.insert(Header {
                key: name,
                value: Some(value.as_bytes()),
            });
        }
        for (name, value) in own {
            headers = headers.insert(Header {
                key: name,
                value: Some(value.as_bytes()),
            });
        }
        let mut record: FutureRecord<'_, str, [u8]> = FutureRecord::to(topic)
            .payload(row.payload.as_slice())
            .headers(headers);
        if let Some(key) = &row.ordering_key {
            record = record.key(key.as_str());
        }
        producer
            .send_result(record)
            .map_err(|(e, _)| classify(&e, "the send"))
    }
}

/// Kafka's rule for topic names: 1 to 249 of `[A-Za-z0-9._-]`, neither `.` nor `..`.
fn legal_topic(topic: &str) -> Result<(), &'static str> {
    if topic.is_empty() || topic.len() > 249 {
        return Err("is not 1 to 249 bytes long");
    }
    if topic == "." || topic == ".." {
        return Err("is not a legal topic name");
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("holds a character Kafka does not take (only A-Z a-z 0-9 . _ -)");
    }
    Ok(())
}

/// What a send's or a delivery's error means for the row, by librdkafka's code.
fn classify(e: &KafkaError, stage: &str) -> Confirmation {
    use RDKafkaErrorCode as C;
    match e.rdkafka_error_code() {
        // Refused before it left the process: librdkafka's own check of this record against
        // `message.max.bytes`.
        Some(C::MessageSizeTooLarge | C::InvalidMessageSize) if stage == "the send" => {
            Confirmation::Refused {
                reason: format!("{stage}: {e}"),
                permanent: true,
            }
        }
        // The broker judges a record batch whole: a batch over the topic's limit fails every
        // record in it, small ones included, so this is retried (the next batch may be
        // smaller) and dead past the attempts.
        Some(C::MessageSizeTooLarge | C::InvalidMessageSize) => Confirmation::Refused {
            reason: format!("{stage}: {e}"),
            permanent: false,
        },
        Some(C::InvalidRecord | C::InvalidTopic) => Confirmation::Refused {
            reason: format!("{stage}: {e}"),
            permanent: true,
        },
        // A topic may yet be created, and permissions granted.
        Some(C::UnknownTopic | C::UnknownTopicOrPartition | C::TopicAuthorizationFailed) => {
            Confirmation::Refused {
                reason: format!("{stage}: {e}"),
                permanent: false,
            }
        }
        // Refused before it left the process.
        Some(C::QueueFull | C::Fatal | C::AllBrokersDown) if stage == "the send" => {
            Confirmation::NotSent {
                reason: e.to_string(),
            }
        }
        _ => Confirmation::Unconfirmed {
            reason: format!("{stage}: {e}"),
        },
    }
}

fn create(config: &KafkaPublisherConfig, down: &Arc<AtomicBool>) -> Result<Producer, KafkaError> {
    let timeout = config.delivery_timeout.as_millis().max(1);
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &config.brokers)
        .set("message.timeout.ms", timeout.to_string())
        // librdkafka wants a request's timeout no longer than the delivery's.
        .set("request.timeout.ms", timeout.min(30_000).to_string())
        .set("message.max.bytes", config.max_message_bytes.to_string());
    for (name, value) in &config.properties {
        client.set(name, value);
    }
    // Last, so that no property turns them off.
    client.set("enable.idempotence", "true").set("acks", "all");
    client.create_with_context(Watch {
        down: Arc::clone(down),
    })
}

/// Asks for the cluster's metadata: an answer means a broker is reachable.
async fn reach(producer: &Arc<Producer>, timeout: Duration) -> Result<(), KafkaError> {
    let probe = Arc::clone(producer);
    tokio::task::spawn_blocking(move || probe.client().fetch_metadata(None, timeout).map(drop))
        .await
        .unwrap_or(Err(KafkaError::Canceled))
}

fn setup<'a>(
    config: &'a KafkaPublisherConfig,
    step: &'static str,
) -> impl FnOnce(KafkaError) -> KafkaSetupError + 'a {
    move |source| KafkaSetupError::Producer {
        step,
        brokers: config.brokers.clone(),
        source,
    }
}

impl Publisher for KafkaPublisher {
    fn system(&self) -> Option<&'static str> {
        Some("kafka")
    }

    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        let not_sent = |reason: String| {
            rows.iter()
                .map(|_| Confirmation::NotSent {
                    reason: reason.clone(),
                })
                .collect()
        };
        let producer = match self.producer() {
            Ok(p) => p,
            Err(e) => return not_sent(format!("could not create a Kafka producer: {e}")),
        };
        if self.down.load(Ordering::Relaxed) {
            // Cleared only once a broker answers again.
            if let Err(e) = reach(&producer, Duration::from_secs(2)).await {
                return not_sent(format!("no Kafka broker is reachable: {e}"));
            }
            self.down.store(false, Ordering::Relaxed);
        }
        // Every record is queued before any acknowledgement is awaited: librdkafka batches
        // them per partition.
        let pending: Vec<Result<DeliveryFuture, Confirmation>> =
            rows.iter().map(|row| self.send(&producer, row)).collect();
        let mut outcomes = Vec::with_capacity(rows.len());
        for p in pending {
            outcomes.push(match p {
                Err(outcome) => outcome,
                Ok(delivery) => match delivery.await {
                    Ok(Ok(_)) => Confirmation::Confirmed,
                    Ok(Err((e, _))) => classify(&e, "the delivery"),
                    Err(_) => Confirmation::Unconfirmed {
                        reason: "the producer dropped the delivery report".to_owned(),
                    },
                },
            });
        }
        outcomes
    }
}
