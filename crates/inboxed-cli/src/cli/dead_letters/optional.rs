//! `--to-broker` for the opt-in brokers, each behind its feature: Kafka through the adapter's
//! rdkafka, SQS through the adapter's SDK client.

#[cfg(feature = "kafka")]
pub(super) use kafka::{kafka_producer, kafka_send};
#[cfg(feature = "sqs")]
pub(super) use sqs::{sqs_client, sqs_send};

#[cfg(feature = "kafka")]
mod kafka {
    use std::time::Duration;

    use anyhow::{Context, bail};
    use inboxed_kafka::rdkafka::ClientConfig;
    use inboxed_kafka::rdkafka::message::{Header, OwnedHeaders};
    use inboxed_kafka::rdkafka::producer::{FutureProducer, FutureRecord, Producer};

    use inboxed_core::observe::DeadLetterRecord;
    use inboxed_core::{KeyPlace, MessageId, REDRIVE_HEADER};

    /// How long the broker may take to answer a metadata request or take a record.
    const WAIT: Duration = Duration::from_secs(10);

    /// A producer on `brokers`, and whether `topic` exists there: the metadata of every topic
    /// is read (asking for one may make the broker create it), which also fails here, as an
    /// error, when the broker cannot be reached.
    pub(crate) async fn kafka_producer(
        brokers: &str,
        topic: &str,
    ) -> anyhow::Result<(FutureProducer, bool)> {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("message.timeout.ms", "10000")
            .create()?;
        let client = producer.clone();
        let metadata =
            tokio::task::spawn_blocking(move || client.client().fetch_metadata(None, WAIT))
                .await?
                .with_context(|| format!("--to-broker: could not reach Kafka at {brokers}"))?;
        let exists = metadata
            .topics()
            .iter()
            .any(|t| t.name() == topic && !t.partitions().is_empty());
        Ok((producer, exists))
    }

    /// Sends the letter to `topic` (known to exist, or the send is refused), keyed by its
    /// message id: librdkafka's partitioner then picks the partition, which need not be the
    /// original record's.
    pub(crate) async fn kafka_send(
        producer: &FutureProducer,
        topic: &str,
        exists: bool,
        d: &DeadLetterRecord,
        id: &MessageId,
        place: KeyPlace<'_>,
        consumer: &str,
    ) -> anyhow::Result<String> {
        if !exists {
            bail!("no Kafka topic named `{topic}`");
        }
        let mut headers = OwnedHeaders::new().insert(Header {
            key: REDRIVE_HEADER,
            value: Some(consumer),
        });
        let key_header = match place {
            KeyPlace::Header(name) => Some(name),
            KeyPlace::Property => Some("message_id"),
            _ => None,
        };
        if let Some(key) = key_header {
            headers = headers.insert(Header {
                key,
                value: Some(id.as_str()),
            });
        }
        let record = FutureRecord::to(topic)
            .key(id.as_str())
            .payload(&d.payload[..])
            .headers(headers);
        let delivered = producer.send(record, WAIT).await.map_err(|(e, _)| {
            anyhow::Error::new(e).context(
                "the broker did not confirm it (if the answer timed out, it may still have been \
                 stored)",
            )
        })?;
        Ok(format!(
            "Kafka topic `{topic}` (partition {}, offset {})",
            delivered.partition, delivered.offset
        ))
    }
}

#[cfg(feature = "sqs")]
mod sqs {
    use anyhow::anyhow;
    use inboxed_sqs::aws_sdk_sqs::Client;
    use inboxed_sqs::aws_sdk_sqs::error::DisplayErrorContext;
    use inboxed_sqs::aws_sdk_sqs::types::MessageAttributeValue;

    use inboxed_core::observe::DeadLetterRecord;
    use inboxed_core::{KeyPlace, MessageId, REDRIVE_HEADER};

    /// A client from the SDK's default chain, checked with one `ListQueues` call, so that an
    /// endpoint, region or credentials that do not work fail here, as an error, rather than as
    /// one refused send per letter.
    pub(crate) async fn sqs_client(queue_url: &str) -> anyhow::Result<Client> {
        let client = inboxed_sqs::client(&inboxed_sqs::SqsConfig::new(queue_url)).await;
        client
            .list_queues()
            .max_results(1)
            .send()
            .await
            .map_err(|e| {
                anyhow!(
                    "--to-broker: could not reach SQS: {}",
                    DisplayErrorContext(e)
                )
            })?;
        Ok(client)
    }

    /// Sends the letter to `queue_url`, its key and the redrive mark as message attributes.
    /// A FIFO queue gets the consumer's name as its group (message ids may be longer than a
    /// group id may be) and a deduplication id of its own for each run: a retry run again after
    /// a fix, within SQS's five minutes, must not be dropped as a copy of the first (the
    /// consumer's processed key already makes a real copy a duplicate).
    pub(crate) async fn sqs_send(
        client: &Client,
        queue_url: &str,
        d: &DeadLetterRecord,
        id: &MessageId,
        place: KeyPlace<'_>,
        consumer: &str,
    ) -> anyhow::Result<String> {
        let body = String::from_utf8(d.payload.clone())
            .map_err(|_| anyhow!("an SQS message body is text, and this payload is not UTF-8"))?;
        let text = |v: &str| {
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(v)
                .build()
        };
        let mut send = client
            .send_message()
            .queue_url(queue_url)
            .message_body(body)
            .message_attributes(REDRIVE_HEADER, text(consumer)?);
        match place {
            KeyPlace::Header(name) => send = send.message_attributes(name, text(id.as_str())?),
            KeyPlace::Property => send = send.message_attributes("message_id", text(id.as_str())?),
            _ => {}
        }
        if queue_url.ends_with(".fifo") {
            let run = uuid::Uuid::now_v7().simple();
            send = send
                .message_group_id(consumer)
                .message_deduplication_id(format!("inboxed-redrive-{}-{run}", d.id));
        }
        let sent = send
            .send()
            .await
            .map_err(|e| anyhow!("{}", DisplayErrorContext(e)))?;
        Ok(format!(
            "SQS queue {queue_url} (message {})",
            sent.message_id().unwrap_or("-")
        ))
    }
}
