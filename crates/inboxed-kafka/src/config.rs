//! Settings of a Kafka source: plain fields, each with its default.

use std::time::Duration;

use inboxed_core::{Backoff, KeySource};

/// Where and how to consume.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KafkaConfig {
    /// Bootstrap servers, e.g. `127.0.0.1:9092` (`bootstrap.servers`). No default.
    pub brokers: String,
    /// The consumer group (`group.id`): the offsets committed are this group's. No default.
    pub group: String,
    /// Topics to subscribe to. No default.
    pub topics: Vec<String>,
    /// Where the message id comes from. Kafka has no producer message-id field, so
    /// [`KeySource::MessageIdProperty`] (the default) reads the header `message_id`. The
    /// offset is never the key: it is a position, and a producer retry writes the same
    /// message at a new one.
    pub key: KeySource,
    /// How often the stored offsets (those of committed messages) are committed to the group
    /// (`auto.commit.interval.ms`). A crash loses at most this much of the group's progress;
    /// what is delivered again is deduplicated by the inbox. Defaults to 1 s.
    pub commit_interval: Duration,
    /// Where a group with no committed offset starts (`auto.offset.reset`). Defaults to
    /// `earliest`, so that nothing published before the first start is skipped.
    pub offset_reset: String,
    /// A member that does not poll for this long is removed and its partitions reassigned
    /// (`max.poll.interval.ms`); the new owner redelivers what was not committed. It must exceed
    /// the longest handler run. Defaults to 5 min.
    pub max_poll_interval: Duration,
    /// Records librdkafka keeps fetched ahead per partition (`queued.min.messages`): the bound
    /// on what waits in the process while the database is slow. Defaults to 1,000.
    pub prefetch: usize,
    /// Further librdkafka properties (`security.protocol`, `sasl.*`, …), set last.
    pub properties: Vec<(String, String)>,
    /// Delay between attempts after a failed receive (librdkafka reconnects by itself).
    /// Defaults to 100 ms doubling to 10 s, with jitter.
    pub reconnect: Backoff,
    /// How long [`KafkaSource::connect`](crate::KafkaSource::connect) waits for the brokers'
    /// metadata before it fails, naming them: a wrong address fails the start rather than
    /// retrying in the background. Defaults to 10 s.
    pub connect_timeout: Duration,
}

impl KafkaConfig {
    /// Settings for consuming `topics` as group `group` from `brokers`.
    #[must_use]
    pub fn new<T: Into<String>>(
        brokers: impl Into<String>,
        group: impl Into<String>,
        topics: impl IntoIterator<Item = T>,
    ) -> Self {
        Self {
            brokers: brokers.into(),
            group: group.into(),
            topics: topics.into_iter().map(Into::into).collect(),
            key: KeySource::default(),
            commit_interval: Duration::from_secs(1),
            offset_reset: "earliest".to_owned(),
            max_poll_interval: Duration::from_secs(300),
            prefetch: 1_000,
            properties: Vec::new(),
            reconnect: Backoff {
                base: Duration::from_millis(100),
                max: Duration::from_secs(10),
            },
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// Sets [`KafkaConfig::key`].
    #[must_use]
    pub fn key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }

    /// Sets [`KafkaConfig::prefetch`] (at least 1).
    #[must_use]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n.max(1);
        self
    }

    /// Sets [`KafkaConfig::commit_interval`].
    #[must_use]
    pub fn commit_interval(mut self, every: Duration) -> Self {
        self.commit_interval = every;
        self
    }

    /// Sets [`KafkaConfig::connect_timeout`].
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Adds a librdkafka property to [`KafkaConfig::properties`].
    #[must_use]
    pub fn property(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((name.into(), value.into()));
        self
    }

    /// Sets [`KafkaConfig::brokers`].
    #[must_use]
    pub fn brokers(mut self, brokers: impl Into<String>) -> Self {
        self.brokers = brokers.into();
        self
    }

    /// Sets [`KafkaConfig::group`].
    #[must_use]
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }

    /// Sets [`KafkaConfig::topics`].
    #[must_use]
    pub fn topics(mut self, topics: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.topics = topics.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`KafkaConfig::offset_reset`].
    #[must_use]
    pub fn offset_reset(mut self, offset_reset: impl Into<String>) -> Self {
        self.offset_reset = offset_reset.into();
        self
    }

    /// Sets [`KafkaConfig::max_poll_interval`].
    #[must_use]
    pub fn max_poll_interval(mut self, max_poll_interval: Duration) -> Self {
        self.max_poll_interval = max_poll_interval;
        self
    }

    /// Sets [`KafkaConfig::properties`].
    #[must_use]
    pub fn properties(mut self, properties: Vec<(String, String)>) -> Self {
        self.properties = properties;
        self
    }

    /// Sets [`KafkaConfig::reconnect`].
    #[must_use]
    pub fn reconnect(mut self, reconnect: Backoff) -> Self {
        self.reconnect = reconnect;
        self
    }
}
