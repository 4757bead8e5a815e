//! The records of a consumer group member's assigned partitions, in partition order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use tracing::warn;

use inboxed_core::{BoxError, DeliverySource};

use crate::config::KafkaConfig;
use crate::delivery::{KafkaDelivery, Shared};
use crate::headers::raw_headers;

/// Why a Kafka source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaSetupError {
    /// Creating the consumer, reaching the brokers or subscribing failed.
    #[error("Kafka: could not {step} (brokers {brokers:?}, group {group:?})")]
    Setup {
        /// The step that failed.
        step: &'static str,
        /// The bootstrap servers.
        brokers: String,
        /// The group.
        group: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// Creating the outbox relay's producer or reaching the brokers failed.
    #[error("Kafka: could not {step} (brokers {brokers:?})")]
    Producer {
        /// The step that failed.
        step: &'static str,
        /// The bootstrap servers.
        brokers: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
}

/// How long a member takes nothing before it pauses its partitions and polls them idle
/// ([`KafkaSource::idle`]), at most a quarter of `max.poll.interval.ms`: shorter holds (the
/// consumer's channel filling under load) cost nothing.
const PAUSE_AFTER: Duration = Duration::from_secs(10);

/// How often a paused member polls: each poll tells the group it is alive.
const POLL_PAUSED: Duration = Duration::from_secs(1);

/// Records of the partitions assigned to this member of the group. Offsets are stored only by
/// acks (after the database commit) and committed every `commit_interval`, and on close.
///
/// While the consumer takes nothing for a while (a record retried in place waits out the
/// ladder, minutes at its later steps), the member pauses its partitions and keeps polling,
/// so that the group does not take them away after `max.poll.interval.ms`; the next read
/// resumes them where they were.
pub struct KafkaSource {
    config: KafkaConfig,
    shared: Arc<Shared>,
    failures: u32,
    /// The assigned partitions are paused by [`KafkaSource::idle`].
    paused: bool,
    /// Records a paused poll returned (fetched before the pause), handed out first.
    held: VecDeque<KafkaDelivery>,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("config", &self.config)
            .field("failures", &self.failures)
            .field("paused", &self.paused)
            .finish_non_exhaustive()
    }
}

impl KafkaSource {
    /// Creates the consumer, checks that a broker answers (librdkafka would otherwise retry a
    /// wrong address silently for ever) and subscribes.
    ///
    /// # Errors
    /// [`KafkaSetupError::Setup`] naming the step that failed.
    pub async fn connect(config: KafkaConfig) -> Result<Self, KafkaSetupError> {
        let setup = |step: &'static str| {
            let (brokers, group) = (config.brokers.clone(), config.group.clone());
            move |source| KafkaSetupError::Setup {
                step,
                brokers,
                group,
                source,
            }
        };
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &config.brokers)
            .set("group.id", &config.group)
            // Offsets advance only when an ack stores them, after the database commit.
            .set("enable.auto.offset.store", "false")
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", millis(config.commit_interval))
            .set("auto.offset.reset", &config.offset_reset)
            .set("max.poll.interval.ms", millis(config.max_poll_interval))
            .set("enable.partition.eof", "false")
            .set("queued.min.messages", config.prefetch.to_string());
        for (name, value) in &config.properties {
            client.set(name, value);
        }
        let consumer: StreamConsumer = client.create().map_err(setup("create the consumer"))?;
        let shared = Arc::new(Shared {
            consumer,
            key: config.key.clone(),
        });
        let (probe, timeout) = (Arc::clone(&shared), config.connect_timeout);
        tokio::task::spawn_blocking(move || probe.consumer.fetch_metadata(None, timeout).map(drop))
            .await
            .unwrap_or(Err(KafkaError::Canceled))
            .map_err(setup("reach the brokers"))?;
        let topics: Vec<&str> = config.topics.iter().map(String::as_str).collect();
        shared
            .consumer
            .subscribe(&topics)
            .map_err(setup("subscribe"))?;
        Ok(Self {
            config,
            shared,
            failures: 0,
            paused: false,
            held: VecDeque::new(),
        })
    }

    fn delivery(&self, record: &BorrowedMessage<'_>) -> KafkaDelivery {
        KafkaDelivery {
            topic: record.topic().to_owned(),
            partition: record.partition(),
            offset: record.offset(),
            headers: raw_headers(record),
            payload: record.payload().unwrap_or_default().to_vec(),
            timestamp_ms: record.timestamp().to_millis(),
            shared: Arc::clone(&self.shared),
        }
    }

    /// Pauses (`true`) or resumes every assigned partition. A failure is logged: a pause that
    /// did not happen leaves records to be held in memory (paused again at the next record), a
    /// resume that did not happen is tried again before the next read.
    fn set_paused(&mut self, pause: bool) {
        let consumer = &self.shared.consumer;
        let done = consumer.assignment().and_then(|assigned| {
            if pause {
                consumer.pause(&assigned)
            } else {
                consumer.resume(&assigned)
            }
        });
        match done {
            Ok(()) => self.paused = pause,
            Err(e) => warn!(error = %e, group = %self.config.group, pause,
                "could not pause or resume the assigned partitions"),
        }
    }
}

fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

impl DeliverySource for KafkaSource {
    type Delivery = KafkaDelivery;

    /// Never ends on its own: a failed receive is retried with backoff, and the consumer loop's
    /// shutdown is what stops it.
    async fn next(&mut self) -> Option<Result<KafkaDelivery, BoxError>> {
        // Paused partitions would never deliver: resume them, however long that takes.
        while self.paused {
            self.set_paused(false);
            if self.paused {
                tokio::time::sleep(POLL_PAUSED).await;
            }
        }
        if let Some(held) = self.held.pop_front() {
            return Some(Ok(held));
        }
        loop {
            let shared = Arc::clone(&self.shared);
            let received = shared.consumer.recv().await;
            match received {
                Ok(record) => {
                    self.failures = 0;
                    return Some(Ok(self.delivery(&record)));
                }
                Err(e) => {
                    self.failures = self.failures.saturating_add(1);
                    warn!(error = %e, group = %self.config.group, failures = self.failures,
                        "Kafka receive failed; retrying");
                    tokio::time::sleep(self.config.reconnect.delay(self.failures)).await;
                }
            }
        }
    }

    /// After 10 s taking nothing (at most a quarter of `max.poll.interval.ms`), pauses the
    /// assigned partitions and polls every second: the group keeps the member, and nothing new is fetched meanwhile. A
    /// record that comes anyway (fetched before the pause, or from a partition a rebalance
    /// assigned since) is held for the next read, and the assignment paused again, so that what
    /// is held stays within one fetch.
    async fn idle(&mut self) {
        tokio::time::sleep(PAUSE_AFTER.min(self.config.max_poll_interval / 4)).await;
        self.set_paused(true);
        loop {
            let shared = Arc::clone(&self.shared);
            match tokio::time::timeout(POLL_PAUSED, shared.consumer.recv()).await {
                Ok(Ok(record)) => {
                    let held = self.delivery(&record);
                    self.held.push_back(held);
                    self.set_paused(true);
                }
                Ok(Err(e)) => {
                    warn!(error = %e, group = %self.config.group, "Kafka poll failed while paused");
                    tokio::time::sleep(POLL_PAUSED).await;
                }
                // Nothing came: the poll itself is what the group needed.
                Err(_) => {}
            }
        }
    }
}
