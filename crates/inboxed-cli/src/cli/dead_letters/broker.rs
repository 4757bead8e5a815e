//! `dead-letters retry --to-broker`: a dead letter published back to the queue its consumer
//! reads, with its key where the consumer's key rule finds it and the redrive header. The
//! consumer's processor then deletes the dead letter in the same transaction as the handler,
//! so the letter stays until the retry commits, and a publish that fails changes nothing.

use anyhow::{Context, bail};
use async_nats::jetstream;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};

use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Confirmation, Connection};

use inboxed_core::observe::DeadLetterRecord;
use inboxed_core::{KeyPlace, KeySource, MessageId, REDRIVE_HEADER};

use super::super::relay::parse_key;

/// Where `--to-broker` publishes.
#[derive(Debug, clap::Args)]
pub(crate) struct BrokerArgs {
    /// Publish back to this broker (amqp://, nats://, redis://, and kafka:// or
    /// sqs+https://<queue url> when built with the `kafka` or `sqs` feature), for a consumer
    /// that processes deliveries with its processor. The message carries the `inboxed-redrive`
    /// header, and the consumer deletes the dead letter when the retry commits.
    #[arg(long = "to-broker", value_name = "URL", conflicts_with = "into_inbox")]
    pub(crate) url: Option<String>,
    /// RabbitMQ: the queue the consumer reads. Published through the default exchange, so no
    /// other queue gets a copy.
    #[arg(long)]
    queue: Option<String>,
    /// NATS JetStream: the subject to publish on; the consumer's stream must capture it.
    #[arg(long)]
    subject: Option<String>,
    /// Redis Streams: the stream the consumer's group reads. It must exist: a mistyped name
    /// is refused, not created.
    #[arg(long)]
    stream: Option<String>,
    /// Kafka: the topic the consumer's group reads (built with the `kafka` feature). The
    /// record's key is the message id.
    #[arg(long)]
    topic: Option<String>,
    /// Redis Streams: the entry field the consumer reads the payload from (its
    /// `RedisConfig::payload_field`).
    #[arg(long, default_value = "payload")]
    payload_field: String,
    /// Where the consumer reads the key, as for `inboxed relay --key`: message-id, header:NAME,
    /// json:/pointer or cloudevents.
    #[arg(long, default_value = "message-id")]
    pub(crate) key: String,
    /// PEM file of certificate authorities to trust for TLS to the broker (amqps://, NATS
    /// tls://, rediss://), for a broker whose certificate a private CA signs. Default: the
    /// system's roots.
    #[arg(long, env = "INBOXED_TLS_CA_FILE")]
    tls_ca_file: Option<std::path::PathBuf>,
}

/// A connection to the broker `--to-broker` names, publishing with confirmation.
pub(crate) enum Publisher {
    Rabbit {
        channel: lapin::Channel,
        queue: String,
        // Kept open for as long as the channel is used.
        _conn: Connection,
    },
    Nats {
        js: jetstream::Context,
        subject: String,
    },
    Redis {
        conn: redis::aio::MultiplexedConnection,
        stream: String,
        payload_field: String,
    },
    #[cfg(feature = "kafka")]
    Kafka {
        producer: inboxed_kafka::rdkafka::producer::FutureProducer,
        topic: String,
        /// Whether the topic was in the broker's metadata at connection.
        exists: bool,
    },
    #[cfg(feature = "sqs")]
    Sqs {
        client: inboxed_sqs::aws_sdk_sqs::Client,
        queue_url: String,
    },
}

/// The brokers `--to-broker` publishes to.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Rabbit,
    Nats,
    Redis,
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    Kafka,
    #[cfg_attr(not(feature = "sqs"), allow(dead_code))]
    Sqs,
}

/// The broker `url` names and its destination flag's value; checked before anything is
/// sent, so that a dry run refuses what the real run would.
fn destination(args: &BrokerArgs, url: &str) -> anyhow::Result<(Kind, String)> {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    let need = |v: &Option<String>, flag: &str| {
        v.clone()
            .with_context(|| format!("--{flag} is required for a {scheme}:// broker"))
    };
    if args.tls_ca_file.is_some() && !matches!(scheme, "amqps" | "nats" | "tls" | "rediss") {
        bail!("--tls-ca-file applies to amqps://, nats:// or tls:// and rediss:// brokers");
    }
    match scheme {
        "amqp" | "amqps" => Ok((Kind::Rabbit, need(&args.queue, "queue")?)),
        "nats" | "tls" => Ok((Kind::Nats, need(&args.subject, "subject")?)),
        "redis" | "rediss" => Ok((Kind::Redis, need(&args.stream, "stream")?)),
        "kafka" if cfg!(feature = "kafka") => Ok((Kind::Kafka, need(&args.topic, "topic")?)),
        "sqs+https" | "sqs+http" if cfg!(feature = "sqs") => {
            Ok((Kind::Sqs, url.trim_start_matches("sqs+").to_owned()))
        }
        "kafka" | "sqs+https" | "sqs+http" => {
            bail!("--to-broker {scheme}://: this inboxed was built without that broker's feature")
        }
        _ => bail!(
            "--to-broker: unknown broker scheme {scheme:?}; use amqp://, nats://, redis://, \
             kafka:// or sqs+https://"
        ),
    }
}

/// Checks the flags of `--to-broker` without connecting.
pub(crate) fn check(args: &BrokerArgs, url: &str) -> anyhow::Result<()> {
    destination(args, url).map(|_| ())
}

impl Publisher {
    /// Connects to the broker `url` names.
    pub(crate) async fn connect(args: &BrokerArgs, url: &str) -> anyhow::Result<Self> {
        let (kind, to) = destination(args, url)?;
        match kind {
            Kind::Rabbit => {
                let conn = inboxed_rabbitmq::connection(url, args.tls_ca_file.as_deref())
                    .await
                    .context("--to-broker: could not connect to RabbitMQ")?;
                let channel = conn.create_channel().await?;
                channel
                    .confirm_select(ConfirmSelectOptions::default())
                    .await?;
                Ok(Self::Rabbit {
                    channel,
                    queue: to,
                    _conn: conn,
                })
            }
            Kind::Nats => {
                let mut options = async_nats::ConnectOptions::new();
                if let Some(path) = &args.tls_ca_file {
                    // Checked here: async-nats would only say the handshake failed.
                    inboxed_core::tls::read_ca_file(path)?;
                    options = options.add_root_certificates(path.clone());
                }
                let client = options
                    .connect(url)
                    .await
                    .context("--to-broker: could not connect to NATS")?;
                Ok(Self::Nats {
                    js: jetstream::new(client),
                    subject: to,
                })
            }
            Kind::Redis => {
                let conn = inboxed_redis::client(url, args.tls_ca_file.as_deref())?
                    .get_multiplexed_async_connection()
                    .await
                    .context("--to-broker: could not connect to Redis")?;
                Ok(Self::Redis {
                    conn,
                    stream: to,
                    payload_field: args.payload_field.clone(),
                })
            }
            #[cfg(feature = "kafka")]
            Kind::Kafka => {
                let brokers = url.trim_start_matches("kafka://").trim_end_matches('/');
                let (producer, exists) = super::optional::kafka_producer(brokers, &to).await?;
                Ok(Self::Kafka {
                    producer,
                    topic: to,
                    exists,
                })
            }
            #[cfg(feature = "sqs")]
            Kind::Sqs => Ok(Self::Sqs {
                client: super::optional::sqs_client(&to).await?,
                queue_url: to,
            }),
            #[allow(unreachable_patterns, reason = "a broker whose feature is off")]
            _ => bail!("--to-broker: this inboxed was built without that broker's feature"),
        }
    }

    /// Publishes dead letter `d` (key `id`) and waits for the broker to take it; returns where
    /// it went.
    pub(crate) async fn publish(
        &mut self,
        d: &DeadLetterRecord,
        id: &MessageId,
        place: KeyPlace<'_>,
    ) -> anyhow::Result<String> {
        // The consumer whose dead letter this lifts: other consumers reading the same stream
        // process the copy as an ordinary delivery.
        let consumer = d.consumer.as_str();
        match self {
            Self::Rabbit { channel, queue, .. } => {
                let mut headers = FieldTable::default();
                headers.insert(
                    REDRIVE_HEADER.into(),
                    AMQPValue::LongString(consumer.into()),
                );
                let mut props = BasicProperties::default().with_delivery_mode(2);
                match place {
                    KeyPlace::Header(name) => {
                        headers.insert(name.into(), AMQPValue::LongString(id.as_str().into()));
                    }
                    KeyPlace::Property => props = props.with_message_id(id.as_str().into()),
                    _ => {}
                }
                if let Some(t) = &d.message_type {
                    props = props.with_type(t.as_str().into());
                }
                if let Some(c) = &d.correlation_id {
                    props = props.with_correlation_id(c.as_str().into());
                }
                // Mandatory: a queue that does not exist returns the message instead of
                // dropping it.
                let options = BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                };
                let confirm = channel
                    .basic_publish(
                        "".into(),
                        queue.as_str().into(),
                        options,
                        &d.payload,
                        props.with_headers(headers),
                    )
                    .await?
                    .await?;
                match confirm {
                    Confirmation::Ack(None) => Ok(format!("RabbitMQ queue `{queue}`")),
                    Confirmation::Ack(Some(_)) => {
                        bail!("RabbitMQ returned it: no queue named `{queue}`")
                    }
                    _ => bail!("RabbitMQ did not confirm it (queue `{queue}`)"),
                }
            }
            Self::Nats { js, subject } => {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(REDRIVE_HEADER, consumer);
                match place {
                    KeyPlace::Header(name) => headers.insert(name, id.as_str()),
                    KeyPlace::Property => headers.insert("Nats-Msg-Id", id.as_str()),
                    _ => {}
                }
                let ack = js
                    .publish_with_headers(subject.clone(), headers, d.payload.clone().into())
                    .await?
                    .await
                    .with_context(|| {
                        format!(
                            "no stream confirmed it (none captures subject `{subject}`, or the \
                             answer timed out, in which case it may still have been stored)"
                        )
                    })?;
                if ack.duplicate {
                    bail!(
                        "stream `{}` dropped it as a duplicate (its Nats-Msg-Id is still in the \
                         stream's duplicate window); retry after the window",
                        ack.stream
                    );
                }
                Ok(format!(
                    "NATS stream `{}` (sequence {})",
                    ack.stream, ack.sequence
                ))
            }
            Self::Redis {
                conn,
                stream,
                payload_field,
            } => {
                let mut entry = redis::cmd("XADD");
                // NOMKSTREAM: a mistyped stream is an error, not a new stream nobody reads.
                entry.arg(stream.as_str()).arg("NOMKSTREAM").arg("*");
                entry.arg(payload_field.as_str()).arg(&d.payload);
                entry.arg(REDRIVE_HEADER).arg(consumer);
                match place {
                    KeyPlace::Header(name) => entry.arg(name).arg(id.as_str()),
                    KeyPlace::Property => entry.arg("message_id").arg(id.as_str()),
                    _ => &mut entry,
                };
                let added: Option<String> = entry.query_async(conn).await?;
                let added = added.with_context(|| format!("no Redis stream named `{stream}`"))?;
                Ok(format!("Redis stream `{stream}` (entry {added})"))
            }
            #[cfg(feature = "kafka")]
            Self::Kafka {
                producer,
                topic,
                exists,
            } => {
                super::optional::kafka_send(producer, topic, *exists, d, id, place, consumer).await
            }
            #[cfg(feature = "sqs")]
            Self::Sqs { client, queue_url } => {
                super::optional::sqs_send(client, queue_url, d, id, place, consumer).await
            }
        }
    }
}

/// The key rule named by `--key`.
pub(crate) fn key_rule(args: &BrokerArgs) -> anyhow::Result<KeySource> {
    parse_key(&args.key)
}
